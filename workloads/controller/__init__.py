"""What runs where gpuready runs: the sweep over worker counts through a launcher, its figures, references and
verdicts, the training report, comparisons across environments, and job output read back."""
