"""Protobuf's varints, for the tests that speak the daemons' wire format by hand."""


def varint(value: int) -> bytes:
    """`value` as a varint (a negative one as its 64-bit two's complement, as protobuf does)."""
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


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at `at` in `data`, and where it ends."""
    shift = value = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at
