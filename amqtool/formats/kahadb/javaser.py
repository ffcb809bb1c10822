"""Just enough of Java Object Serialization to read KahaDB's checkpointed ack-file map (and the LevelDB
store's ``:collection-meta`` counters, :func:`read_stream`).

``KAHA_ACK_MESSAGE_FILE_MAP_COMMAND`` carries ``ObjectOutputStream.writeObject`` of a
``HashMap<Integer, HashSet<Integer>>`` (kahadb-format.md §4.3, §6.2). This reader handles the grammar those
streams use (objects, class descriptors, back references, block data, strings, null) and interprets
HashMap, HashSet and Integer; anything else is a FormatError. It never instantiates anything.
"""
from __future__ import annotations

import struct

from amqtool.errors import FormatError

MAGIC = b"\xac\xed\x00\x05"
TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_STRING, TC_ARRAY = 0x70, 0x71, 0x72, 0x73, 0x74, 0x75
TC_BLOCKDATA, TC_ENDBLOCKDATA, TC_BLOCKDATALONG, TC_LONGSTRING = 0x77, 0x78, 0x7A, 0x7C
BASE_HANDLE = 0x7E0000
SC_WRITE_METHOD = 0x01
_PRIM_SIZES = {"B": 1, "C": 2, "D": 8, "F": 4, "I": 4, "J": 8, "S": 2, "Z": 1}
_PRIM_FORMATS = {"B": ">b", "C": ">H", "D": ">d", "F": ">f", "I": ">i", "J": ">q", "S": ">h", "Z": ">?"}


class _ClassDesc:
    __slots__ = ("name", "flags", "fields", "super")

    def __init__(self, name, flags, fields, sup):
        self.name, self.flags, self.fields, self.super = name, flags, fields, sup


class _Obj:
    __slots__ = ("cls", "values", "annotations")

    def __init__(self, cls):
        self.cls = cls
        self.values = {}
        self.annotations = []  # per class in the hierarchy with a writeObject: [bytes | object, ...]


class _Parser:
    def __init__(self, data: bytes):
        self.d = bytes(data)
        self.p = 0
        self.handles: list = []
        self.depth = 0

    def take(self, n):
        if self.p + n > len(self.d):
            raise FormatError("Java serialization stream ends early", offset=self.p)
        b = self.d[self.p:self.p + n]
        self.p += n
        return b

    def u8(self):
        return self.take(1)[0]

    def utf(self):
        n = struct.unpack(">H", self.take(2))[0]
        return self.take(n).decode("utf-8", "replace")

    def content(self):
        self.depth += 1
        if self.depth > 64:
            raise FormatError("Java serialization nested too deeply")
        try:
            tc = self.u8()
            if tc == TC_NULL:
                return None
            if tc == TC_REFERENCE:
                h = struct.unpack(">i", self.take(4))[0] - BASE_HANDLE
                if not 0 <= h < len(self.handles):
                    raise FormatError(f"Java serialization: bad back reference {h}", offset=self.p - 4)
                return self.handles[h]
            if tc == TC_CLASSDESC:
                return self.classdesc_body()
            if tc == TC_STRING:
                s = self.utf()
                self.handles.append(s)
                return s
            if tc == TC_LONGSTRING:
                n = struct.unpack(">q", self.take(8))[0]
                s = self.take(n).decode("utf-8", "replace")
                self.handles.append(s)
                return s
            if tc == TC_OBJECT:
                return self.object_body()
            if tc == TC_ARRAY:
                return self.array_body()
            if tc == TC_BLOCKDATA:
                return self.take(self.u8())
            if tc == TC_BLOCKDATALONG:
                return self.take(struct.unpack(">i", self.take(4))[0])
            raise FormatError(f"Java serialization: unsupported type code 0x{tc:02x}", offset=self.p - 1)
        finally:
            self.depth -= 1

    def classdesc_body(self):
        name = self.utf()
        self.take(8)  # serialVersionUID
        cd = _ClassDesc(name, 0, [], None)
        self.handles.append(cd)
        cd.flags = self.u8()
        n = struct.unpack(">h", self.take(2))[0]
        for _ in range(n):
            code = chr(self.u8())
            fname = self.utf()
            if code in "L[":
                self.content()  # class name string
            elif code not in _PRIM_SIZES:
                raise FormatError(f"Java serialization: bad field type {code!r}")
            cd.fields.append((code, fname))
        self.annotation_block()
        cd.super = self.content()
        return cd

    def array_body(self):
        """A primitive byte array (``[B``) as bytes; other arrays are not needed and refused."""
        cd = self.content()
        if not isinstance(cd, _ClassDesc) or cd.name != "[B":
            raise FormatError(f"Java serialization: unsupported array {getattr(cd, 'name', cd)!r}")
        n = struct.unpack(">i", self.take(4))[0]
        if n < 0:
            raise FormatError(f"Java serialization: negative array length {n}", offset=self.p - 4)
        b = self.take(n)
        self.handles.append(b)
        return b

    def annotation_block(self) -> list:
        out = []
        while True:
            if self.p < len(self.d) and self.d[self.p] == TC_ENDBLOCKDATA:
                self.p += 1
                return out
            out.append(self.content())

    def object_body(self):
        cd = self.content()
        if not isinstance(cd, _ClassDesc):
            raise FormatError("Java serialization: object without a class descriptor")
        obj = _Obj(cd)
        self.handles.append(obj)
        chain = []
        c = cd
        while c is not None:
            chain.append(c)
            c = c.super
        for c in reversed(chain):
            for code, fname in c.fields:
                if code in "L[":
                    obj.values[fname] = self.content()
                else:
                    obj.values[fname] = struct.unpack(_PRIM_FORMATS[code], self.take(_PRIM_SIZES[code]))[0]
            if c.flags & SC_WRITE_METHOD:
                obj.annotations.append(self.annotation_block())
        return obj


def _integer(o) -> int:
    if isinstance(o, _Obj) and o.cls.name == "java.lang.Integer" and isinstance(o.values.get("value"), int):
        return o.values["value"]
    raise FormatError(f"expected java.lang.Integer, found {getattr(getattr(o, 'cls', None), 'name', type(o).__name__)}")


def _flatten(ann: list) -> tuple[bytes, list]:
    blocks = b"".join(a for a in ann if isinstance(a, bytes))
    objs = [a for a in ann if not isinstance(a, bytes)]
    return blocks, objs


def decode_ack_file_map(data) -> dict[int, set[int]]:
    """The ack-file map: data file id -> set of data file ids of the messages its records refer to."""
    data = bytes(data)
    if data[:4] != MAGIC:
        raise FormatError("ack-file map is not a Java serialization stream (no AC ED 00 05)")
    ps = _Parser(data)
    ps.p = 4
    try:
        root = ps.content()
    except (struct.error, UnicodeDecodeError, AttributeError, KeyError, IndexError, TypeError, ValueError) as err:
        # a damaged stream misleads the parser anywhere (a class descriptor's name read as a string, a handle
        # past the table): whatever it trips on, the broker's ObjectInputStream refuses the map too
        raise FormatError(f"ack-file map: {type(err).__name__}: {err}") from None
    if not isinstance(root, _Obj) or root.cls.name != "java.util.HashMap" or not root.annotations:
        raise FormatError("ack-file map: root object is not a java.util.HashMap")
    blocks, objs = _flatten(root.annotations[-1])
    if len(blocks) < 8:
        raise FormatError("ack-file map: HashMap without its size block")
    size = struct.unpack_from(">i", blocks, 4)[0]
    if size < 0 or len(objs) != 2 * size:
        raise FormatError(f"ack-file map: HashMap says {size} entries, stream holds {len(objs) // 2}")
    out: dict[int, set[int]] = {}
    for i in range(size):
        k, v = objs[2 * i], objs[2 * i + 1]
        if not isinstance(v, _Obj) or v.cls.name not in ("java.util.HashSet", "java.util.LinkedHashSet"):
            raise FormatError("ack-file map: value is not a java.util.HashSet")
        vb, vobjs = _flatten(v.annotations[-1] if v.annotations else [])
        out[_integer(k)] = {_integer(x) for x in vobjs}
    if ps.p != len(data):
        raise FormatError(f"ack-file map: {len(data) - ps.p} bytes after the map")
    return out


def read_stream(data) -> tuple[bytes, list]:
    """A whole serialization stream written with ``writeInt``/``writeLong``/``writeObject`` calls at the top
    level: (the block data bytes joined, the objects in order). Objects come as parsed (``_Obj`` with
    ``cls.name`` and ``values``; byte arrays as bytes)."""
    data = bytes(data)
    if data[:4] != MAGIC:
        raise FormatError("not a Java serialization stream (no AC ED 00 05)")
    ps = _Parser(data)
    ps.p = 4
    blocks, objs = [], []
    try:
        while ps.p < len(data):
            block = data[ps.p] in (TC_BLOCKDATA, TC_BLOCKDATALONG)
            c = ps.content()
            (blocks if block else objs).append(c)
    except (struct.error, UnicodeDecodeError) as err:
        raise FormatError(f"Java serialization: {err}") from None
    return b"".join(blocks), objs
