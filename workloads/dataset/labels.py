"""ChestX-ray14's fourteen labels, shared by the converter and both frameworks' workers."""

from __future__ import annotations

#: ChestX-ray14's labels, in the order the model's outputs and the TFRecords' multi-hot vectors use.
PATHOLOGIES = (
    "Atelectasis",
    "Cardiomegaly",
    "Effusion",
    "Infiltration",
    "Mass",
    "Nodule",
    "Pneumonia",
    "Pneumothorax",
    "Consolidation",
    "Edema",
    "Emphysema",
    "Fibrosis",
    "Pleural_Thickening",
    "Hernia",
)
