"""The manual's pages, shipped in the wheel as package data: gpuready's messages name them by their installed
path (``gpuready.core.docs.page``), so a user without the source reads the page the message means."""
