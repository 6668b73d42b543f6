"""ChestX-ray14 as both frameworks read it: NIH's layout converted to sharded TFRecords, and the TFRecord format."""
