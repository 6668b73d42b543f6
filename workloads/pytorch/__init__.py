"""The PyTorch CheXNet worker (DistributedDataParallel under torchrun): DenseNet-121 where torchvision is missing,
the DataLoader input pipeline, training entry point."""
