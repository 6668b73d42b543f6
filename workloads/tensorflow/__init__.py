"""The TensorFlow CheXNet worker (Horovod or MultiWorkerMirroredStrategy): model, tf.data input pipeline,
training entry point."""
