"""TFRecord files of ``tf.train.Example`` records, read and written without TensorFlow.

The PyTorch path reads the converter's shards with this, so one dataset serves both frameworks.
A TFRecord is a sequence of ``uint64 length, uint32 masked crc32c(length), data, uint32 masked
crc32c(data)`` (little-endian); an Example is a protobuf ``Features`` map from names to a bytes,
float or int64 list (tensorflow/core/example/example.proto, feature.proto). Only what the
converter writes is supported: bytes and int64 lists.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

_CRC_TABLE: list[int] = []


def _table() -> list[int]:
    if not _CRC_TABLE:
        for n in range(256):
            c = n
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1  # Castagnoli polynomial, reflected
            _CRC_TABLE.append(c)
    return _CRC_TABLE


def crc32c(data: bytes) -> int:
    table, crc = _table(), 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class CorruptRecord(ValueError):
    pass


def read_records(path: str | Path, *, verify: bool = False) -> Iterator[bytes]:
    """The records of one file, in order. ``verify`` checks the data CRCs (slow in pure Python)."""
    with open(path, "rb") as fh:
        while True:
            head = fh.read(12)
            if not head:
                return
            if len(head) < 12:
                raise CorruptRecord(f"{path}: truncated record header")
            (length,) = struct.unpack("<Q", head[:8])
            if struct.unpack("<I", head[8:])[0] != masked_crc(head[:8]):
                raise CorruptRecord(f"{path}: bad length checksum (not a TFRecord file?)")
            data = fh.read(length)
            footer = fh.read(4)
            if len(data) < length or len(footer) < 4:
                raise CorruptRecord(f"{path}: truncated record")
            if verify and struct.unpack("<I", footer)[0] != masked_crc(data):
                raise CorruptRecord(f"{path}: bad data checksum")
            yield data


def write_records(path: str | Path, records: list[bytes]) -> None:
    with open(path, "wb") as fh:
        for data in records:
            length = struct.pack("<Q", len(data))
            fh.write(length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data)))


# ------------------------------------------------------------------ protobuf wire format
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    """(field number, wire type, value) of one message: varints as ints, length-delimited as bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield number, wire, value
        elif wire == 2:
            size, pos = _varint(buf, pos)
            yield number, wire, buf[pos : pos + size]
            pos += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            yield number, wire, buf[pos : pos + width]
            pos += width
        else:
            raise CorruptRecord(f"unsupported protobuf wire type {wire}")


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def parse_example(record: bytes) -> dict[str, list[bytes] | list[int]]:
    """An Example's features: name -> list of bytes (bytes_list) or of ints (int64_list)."""
    features: dict[str, list[bytes] | list[int]] = {}
    for number, _, features_msg in _fields(record):
        if number != 1 or not isinstance(features_msg, bytes):
            continue
        for entry_number, _, entry in _fields(features_msg):  # map<string, Feature> entries
            if entry_number != 1 or not isinstance(entry, bytes):
                continue
            name, feature = "", b""
            for n, _, v in _fields(entry):
                if n == 1 and isinstance(v, bytes):
                    name = v.decode()
                elif n == 2 and isinstance(v, bytes):
                    feature = v
            for kind, _, payload in _fields(feature):
                if kind == 1 and isinstance(payload, bytes):  # BytesList
                    features[name] = [v for n, _, v in _fields(payload) if n == 1 and isinstance(v, bytes)]
                elif kind == 3 and isinstance(payload, bytes):  # Int64List, packed or not
                    values: list[int] = []
                    for n, wire, v in _fields(payload):
                        if n != 1:
                            continue
                        if wire == 2 and isinstance(v, bytes):
                            pos = 0
                            while pos < len(v):
                                item, pos = _varint(v, pos)
                                values.append(_int64(item))
                        elif isinstance(v, int):
                            values.append(_int64(v))
                    features[name] = values
    return features


def _key(number: int, wire: int) -> bytes:
    return _encode_varint(number << 3 | wire)


def _encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _delimited(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _encode_varint(len(payload)) + payload


def encode_example(features: dict[str, list[bytes] | list[int]]) -> bytes:
    """The serialised Example TensorFlow's ``tf.train.Example(...).SerializeToString()`` parses alike."""
    entries = b""
    for name, values in features.items():
        if all(isinstance(v, bytes) for v in values):
            feature = _delimited(1, b"".join(_delimited(1, v) for v in values))  # type: ignore[arg-type]
        else:
            packed = b"".join(_encode_varint(int(v)) for v in values)
            feature = _delimited(3, _delimited(1, packed))
        entries += _delimited(1, _delimited(1, name.encode()) + _delimited(2, feature))
    return _delimited(1, entries)
