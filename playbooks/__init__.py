"""The Ansible collection gpuready.gpu, shipped inside the wheel as package data.

Python code finds it with :func:`gpuready.core.collection.collection_dir`; nothing here is imported.
"""
