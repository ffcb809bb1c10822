"""Print the compression type of every data block of LevelDB .sst files (checks snappy vs none)."""
import sys, struct, collections
def varint(b, i):
    r = s = 0
    while True:
        x = b[i]; i += 1; r |= (x & 0x7f) << s; s += 7
        if not x & 0x80: return r, i
def unsnappy(b):
    n, i = varint(b, 0); out = bytearray()
    while i < len(b):
        t = b[i]; i += 1; k = t & 3
        if k == 0:
            l = t >> 2
            if l >= 60:
                nb = l - 59; l = int.from_bytes(b[i:i+nb], 'little'); i += nb
            l += 1; out += b[i:i+l]; i += l; continue
        if k == 1: l = 4 + ((t >> 2) & 7); o = ((t >> 5) << 8) | b[i]; i += 1
        elif k == 2: l = (t >> 2) + 1; o = int.from_bytes(b[i:i+2], 'little'); i += 2
        else: l = (t >> 2) + 1; o = int.from_bytes(b[i:i+4], 'little'); i += 4
        for _ in range(l): out.append(out[-o])
    assert len(out) == n
    return bytes(out)
def blocks(path):
    b = open(path, 'rb').read()
    f = b[-48:]
    assert struct.unpack('<Q', f[40:48])[0] == 0xdb4775248b80fb57, 'bad magic'
    i = 0
    mo, i = varint(f, i); ms, i = varint(f, i); io, i = varint(f, i); isz, i = varint(f, i)
    out = collections.Counter()
    # index block: keys -> handles; parse entries (restart-prefix-compressed)
    def block_types(off, size): return b[off + size]
    itype = block_types(io, isz)
    out['index:%d' % itype] += 1
    if True:
        blk = b[io:io + isz]
        if itype == 1: blk = unsnappy(blk)
        nrest = struct.unpack('<I', blk[-4:])[0]
        end = len(blk) - 4 - 4 * nrest; j = 0
        while j < end:
            sh, j = varint(blk, j); ns, j = varint(blk, j); vl, j = varint(blk, j)
            j += ns; v = blk[j:j + vl]; j += vl
            o, k = varint(v, 0); s, k = varint(v, k)
            out['data:%d' % b[o + s]] += 1
    return out
for p in sys.argv[1:]:
    print(p, dict(blocks(p)))
