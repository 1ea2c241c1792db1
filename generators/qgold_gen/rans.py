"""rANS-compressed int8 weight tiles, container version 2, per reference/spec/rans.md (normative copy
in the project's format specs): table normalization, predictors, the auto policy, the interleaved
coder, the pinned container writer with its container checksum, a validating reader and decoder, and
the bit-exact fused product.

Conventions:
  * weights travel as their bytes: w is a uint8 [M, K] array holding (uint8) W;
  * scales travel as float32 bit patterns (uint32 [M]);
  * a tile is a uint8 [256, 256] array, row r = lane r, positions outside the matrix 0;
  * errors are RansError carrying the errors.h name (rans_bad_magic, ...).

The coder works on exact integers: states live in [2^15, 2^31) and every intermediate value of
encoder and decoder stays below 2^31, so int64 numpy arrays hold them without wrapping. Both coder
loops run over the 256 columns and handle all lanes of a warp (and all warps, and on encode all
tiles) at once as arrays; the word order inside a column (lane 31 down to 0 on encode, lane 0 up on
decode) is made explicit by reversing/ranking lanes.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from . import fp16

VERSION = 2                        # container version; 1 had no container checksum and is not read
TILE = 256
WARPS = 8
WARP = 32
SCALE_BITS = 12
M_SCALE = 1 << SCALE_BITS          # 4096, the table sum
L = 1 << 15                        # lower end of the state interval [L, 2^31)
STATE_END = 1 << 31
HEADER_SIZE = 64
TABLE_OFFSET = 64
META_OFFSET = HEADER_SIZE + 2 * 256  # 576, the writer's meta_offset
META_SIZE = 32
PAYLOAD_FIXED = 4 * 256 + 4 * WARPS  # init_state[256] + warp_end[8] = 1056
AUTO = 255
MAGIC = b"RANS"
FLAG_CHECKSUMS = 1

# Header field offsets (all little-endian).
OFF_VERSION, OFF_HEADER_SIZE, OFF_SCALE_BITS, OFF_FLAGS = 4, 6, 8, 9
OFF_LANES, OFF_TILE_ROWS, OFF_TILE_COLS = 10, 12, 14
OFF_M, OFF_K, OFF_TILES_R, OFF_TILES_C = 16, 20, 24, 28
OFF_SCALES, OFF_META, OFF_FILE_SIZE, OFF_CRC = 32, 40, 48, 56
# With flag bit 0: u32 CRC-32 at 56 and its complement at 60; without it 8 zero bytes.
_HEADER = struct.Struct("<4sHHBBHHHIIIIQQQQ")
assert _HEADER.size == HEADER_SIZE
_META = struct.Struct("<QQIB11s")
assert _META.size == META_SIZE


class RansError(Exception):
    """A failure with the errors.h name the reference returns for it."""

    def __init__(self, name: str, detail: str = ""):
        super().__init__(f"{name}: {detail}" if detail else name)
        self.name = name


def round16(n: int) -> int:
    return (n + 15) // 16 * 16


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------------------------
# Table normalization (integer only)
# ---------------------------------------------------------------------------------------------

def normalize(counts) -> np.ndarray:
    """Histogram (256 counts) -> uint16 freq[256] summing to 4096, per the spec's pinned rule.

    f = max(1, floor(c * 4096 / N)) and r = (c * 4096) mod N for present symbols. Short: the
    present symbols ordered by (r descending, symbol ascending) get +1 each, first ones first, as
    many as are missing (sum of floors = 4096 - sum(r)/N, and every r < N, so fewer are missing
    than there are symbols with r > 0: nobody is raised twice). Over (only through the raise to
    1): repeatedly -1 on the largest f, lowest symbol among equals. All counts 0: freq[0] = 4096.
    """
    c = [int(v) for v in np.asarray(counts, dtype=np.uint64).reshape(-1)]
    if len(c) != 256:
        raise ValueError("normalize needs 256 counts")
    n = sum(c)
    freq = [0] * 256
    if n == 0:
        freq[0] = M_SCALE
        return np.array(freq, np.uint16)
    rem = [0] * 256
    for s in range(256):
        if c[s]:
            freq[s] = max(1, c[s] * M_SCALE // n)
            rem[s] = c[s] * M_SCALE % n
    total = sum(freq)
    if total < M_SCALE:
        order = sorted((s for s in range(256) if c[s]), key=lambda s: (-rem[s], s))
        short = M_SCALE - total
        assert short <= len(order)
        for s in order[:short]:
            freq[s] += 1
    while sum(freq) > M_SCALE:
        s = max(range(256), key=lambda k: (freq[k], -k))  # largest f, lowest symbol on ties
        assert freq[s] > 1
        freq[s] -= 1
    assert sum(freq) == M_SCALE
    return np.array(freq, np.uint16)


def cum_of(freq) -> np.ndarray:
    f = np.asarray(freq, np.int64)
    return np.concatenate([[0], np.cumsum(f)[:-1]]).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Predictors (mod 256, neighbours outside the tile are 0)
# ---------------------------------------------------------------------------------------------

def _shift_right(b: np.ndarray) -> np.ndarray:
    """b[..., r, c-1] with 0 at c = 0."""
    out = np.zeros_like(b)
    out[..., :, 1:] = b[..., :, :-1]
    return out


def _shift_down(b: np.ndarray) -> np.ndarray:
    """b[..., r-1, c] with 0 at r = 0."""
    out = np.zeros_like(b)
    out[..., 1:, :] = b[..., :-1, :]
    return out


def predict(tile: np.ndarray, mode: int) -> np.ndarray:
    """Bytes -> symbols e[r][c] (uint8) for predictor mode 0..3; works on [..., 256, 256]."""
    b = np.asarray(tile, np.int64)
    if mode == 0:
        e = b
    elif mode == 1:
        e = b - _shift_right(b)
    elif mode == 2:
        e = b - _shift_down(b)
    elif mode == 3:
        e = b - _shift_right(b) - _shift_down(b) + _shift_right(_shift_down(b))
    else:
        raise RansError("rans_predictor_invalid", f"mode {mode}")
    return (e & 0xFF).astype(np.uint8)


def unpredict(e: np.ndarray, mode: int) -> np.ndarray:
    """Symbols -> bytes: the inverse of predict. Left is a prefix sum along the row, up along the
    column, gradient both (its symbol is the mixed second difference), all mod 256."""
    x = np.asarray(e, np.int64)
    if mode == 0:
        b = x
    elif mode == 1:
        b = np.cumsum(x, axis=-1)
    elif mode == 2:
        b = np.cumsum(x, axis=-2)
    elif mode == 3:
        b = np.cumsum(np.cumsum(x, axis=-1), axis=-2)
    else:
        raise RansError("rans_predictor_invalid", f"mode {mode}")
    return (b & 0xFF).astype(np.uint8)


def histogram(symbols: np.ndarray) -> np.ndarray:
    return np.bincount(np.asarray(symbols, np.uint8).reshape(-1), minlength=256).astype(np.uint64)


def auto_mode(tile: np.ndarray) -> int:
    """The mode with the largest sum of count^2 over its symbols (ties to the lower mode)."""
    best, best_score = 0, -1
    for mode in range(4):
        h = histogram(predict(tile, mode)).astype(object)
        score = int(sum(v * v for v in h))
        if score > best_score:
            best, best_score = mode, score
    return best


def tiles_of(w: np.ndarray, M: int, K: int) -> np.ndarray:
    """uint8 [tiles_r, tiles_c, 256, 256]: the tiles of W, zero outside the matrix."""
    tr, tc = ceil_div(M, TILE), ceil_div(K, TILE)
    pad = np.zeros((tr * TILE, tc * TILE), np.uint8)
    pad[:M, :K] = np.asarray(w, np.uint8).reshape(M, K)
    return pad.reshape(tr, TILE, tc, TILE).transpose(0, 2, 1, 3).copy()


# ---------------------------------------------------------------------------------------------
# Coder
# ---------------------------------------------------------------------------------------------

@dataclass
class TileStream:
    init_state: np.ndarray  # uint32 [256]
    warp_end: np.ndarray    # uint32 [8], cumulative
    words: np.ndarray       # uint16 [warp_end[7]]


def encode_symbols(sym: np.ndarray, freq) -> list[TileStream]:
    """Encode n tiles of symbols (uint8 [n, 256, 256], lane = row) under one table.

    Per warp: all states L; for t = 255..0, lanes 31..0 encode e[32w+l][t], emitting
    x & 0xFFFF then x >>= 16 when x >= 2^19 * f. The emitted words are recorded per (column
    step, lane) with lanes stored in descending order, so the row-major order of the recorded
    words is the emission order; the stream is that list reversed.
    """
    sym = np.asarray(sym, np.uint8)
    n = sym.shape[0]
    f_tab = np.asarray(freq, np.int64)
    c_tab = cum_of(freq)
    if n and np.any(f_tab[sym] == 0):
        bad = int(np.unique(sym[f_tab[sym] == 0])[0])
        raise RansError("rans_symbol_not_in_table", f"symbol {bad} has frequency 0")
    e = sym.reshape(n, WARPS, WARP, TILE)                   # [tile, warp, lane, column]
    x = np.full((n, WARPS, WARP), L, np.int64)
    words = np.zeros((n, WARPS, TILE, WARP), np.uint16)     # [.., step k = 255 - t, lane desc]
    emitted = np.zeros((n, WARPS, TILE, WARP), bool)
    for k, t in enumerate(range(TILE - 1, -1, -1)):
        s = e[:, :, :, t].astype(np.int64)
        f = f_tab[s]
        emit = x >= (f << 19)
        words[:, :, k, :] = (x & 0xFFFF)[:, :, ::-1]
        emitted[:, :, k, :] = emit[:, :, ::-1]
        x = np.where(emit, x >> 16, x)
        x = (x // f) * M_SCALE + (x % f) + c_tab[s]
        assert np.all((x >= L) & (x < STATE_END))
    out = []
    for i in range(n):
        streams = [words[i, w][emitted[i, w]][::-1] for w in range(WARPS)]
        lens = np.array([len(s) for s in streams], np.int64)
        out.append(TileStream(init_state=x[i].reshape(TILE).astype(np.uint32),
                              warp_end=np.cumsum(lens).astype(np.uint32),
                              words=np.concatenate(streams).astype(np.uint16)))
    return out


def payload_bytes(ts: TileStream) -> bytes:
    """init_state[256], warp_end[8], words, zero bytes to a multiple of 16."""
    raw = (np.asarray(ts.init_state, "<u4").tobytes() + np.asarray(ts.warp_end, "<u4").tobytes()
           + np.asarray(ts.words, "<u2").tobytes())
    return raw + bytes(round16(len(raw)) - len(raw))


def decode_symbols(init_state, warp_end, words, freq) -> np.ndarray:
    """One tile's 256 x 256 symbols from its streams. Raises rans_truncated, rans_trailing_data
    and rans_corrupt (final state) per the spec; the table must be valid (sum 4096)."""
    f_tab = np.asarray(freq, np.int64)
    c_tab = cum_of(freq)
    slot_sym = np.repeat(np.arange(256), f_tab)             # slot -> symbol, 4096 entries
    assert slot_sym.size == M_SCALE
    words = np.asarray(words, np.int64)
    ends = np.asarray(warp_end, np.int64)
    starts = np.concatenate([[0], ends[:-1]])
    x = np.asarray(init_state, np.int64).reshape(WARPS, WARP).copy()
    ptr = np.zeros(WARPS, np.int64)
    out = np.zeros((WARPS, WARP, TILE), np.uint8)
    for t in range(TILE):
        slot = x & (M_SCALE - 1)
        s = slot_sym[slot]
        out[:, :, t] = s
        x = f_tab[s] * (x >> SCALE_BITS) + slot - c_tab[s]
        need = x < L
        rank = np.cumsum(need, axis=1) - need               # lower lanes take words first
        cnt = need.sum(axis=1)
        over = ptr + cnt > ends - starts
        if over.any():
            w = int(np.argmax(over))
            raise RansError("rans_truncated",
                            f"warp {w} needs a word past its stream at column {t}")
        idx = np.where(need, starts[:, None] + ptr[:, None] + rank, 0)
        nxt = words[idx] if words.size else np.zeros_like(idx)
        x = np.where(need, (x << 16) | nxt, x)
        ptr += cnt
    if np.any(ptr != ends - starts):
        w = int(np.argmax(ptr != ends - starts))
        left = int(ends[w] - starts[w] - ptr[w])
        raise RansError("rans_trailing_data", f"warp {w} left {left} words")
    if np.any(x != L):
        lane = int(np.argmax((x != L).reshape(-1)))
        raise RansError("rans_corrupt", f"lane {lane} ends in state {int(x.reshape(-1)[lane])}")
    return out.reshape(TILE, TILE)


def adler32(data: bytes) -> int:
    return zlib.adler32(data) & 0xFFFFFFFF


def container_crc(buf: bytes) -> int:
    """zlib's CRC-32 of the whole buffer with its checksum field (bytes 56..63) counted as zero."""
    return zlib.crc32(bytes(buf[:OFF_CRC]) + bytes(8) + bytes(buf[OFF_CRC + 8:])) & 0xFFFFFFFF


def seal(buf: bytes) -> bytes:
    """buf with bytes 56..63 rewritten to what the spec requires of its flags: the container CRC and
    its complement when flag bit 0 is set, zeros otherwise. The writer's last step; corrupt fixtures
    use it to break one inner rule of a checksummed container and keep the checksum valid."""
    b = bytearray(buf)
    if len(b) < HEADER_SIZE:
        raise ValueError("a container checksum needs the 64-byte header")
    if b[OFF_FLAGS] & FLAG_CHECKSUMS:
        crc = container_crc(b)
        struct.pack_into("<II", b, OFF_CRC, crc, crc ^ 0xFFFFFFFF)
    else:
        struct.pack_into("<Q", b, OFF_CRC, 0)
    return bytes(b)


# ---------------------------------------------------------------------------------------------
# Container writer (the pinned layout)
# ---------------------------------------------------------------------------------------------

@dataclass
class TileRecord:
    mode: int
    stream: TileStream
    checksum: int


def header_bytes(M: int, K: int, flags: int, scales_offset: int, meta_offset: int,
                 file_size: int) -> bytes:
    return _HEADER.pack(MAGIC, VERSION, HEADER_SIZE, SCALE_BITS, flags, TILE, TILE, TILE, M, K,
                        ceil_div(M, TILE), ceil_div(K, TILE), scales_offset, meta_offset,
                        file_size, 0)


def write_container(M: int, K: int, freq, scales_bits, records: list[TileRecord],
                    checksums: bool) -> bytes:
    """The writer layout: header, table, meta at 576, scales right after the meta, payloads from
    scales_offset + 4M rounded up to 16, in tile order, no gaps; the container checksum last."""
    n = len(records)
    assert n == ceil_div(M, TILE) * ceil_div(K, TILE)
    scales_offset = META_OFFSET + META_SIZE * n
    pos = round16(scales_offset + 4 * M)
    payloads, metas = [], []
    for rec in records:
        p = payload_bytes(rec.stream)
        metas.append(_META.pack(pos, len(p), rec.checksum if checksums else 0, rec.mode, bytes(11)))
        payloads.append(p)
        pos += len(p)
    file_size = pos
    flags = FLAG_CHECKSUMS if checksums else 0
    out = bytearray(header_bytes(M, K, flags, scales_offset, META_OFFSET, file_size))
    out += np.asarray(freq, "<u2").tobytes()
    out += b"".join(metas)
    out += np.asarray(scales_bits, "<u4").reshape(-1).tobytes()
    out += bytes(round16(len(out)) - len(out))
    out += b"".join(payloads)
    assert len(out) == file_size
    return seal(bytes(out))


def choose_modes(tiles: np.ndarray, modes) -> list[int]:
    tr, tc = tiles.shape[:2]
    n = tr * tc
    req = [AUTO] * n if modes is None else [int(m) for m in np.asarray(modes).reshape(-1)]
    if len(req) != n:
        raise RansError("rans_size_mismatch", f"{len(req)} modes for {n} tiles")
    flat = tiles.reshape(n, TILE, TILE)
    out = []
    for i, m in enumerate(req):
        if m == AUTO:
            out.append(auto_mode(flat[i]))
        elif 0 <= m <= 3:
            out.append(m)
        else:
            raise RansError("rans_predictor_invalid", f"mode {m}")
    return out


def encode(w: np.ndarray, scales_bits, M: int, K: int, modes=None,
           checksums: bool = False) -> bytes:
    """W (uint8 [M, K]) and scales (float32 bits [M]) -> container bytes in the pinned layout.
    modes: one request per tile (0..3 or 255 = auto), or None for all auto."""
    scales_bits = np.asarray(scales_bits, np.uint32).reshape(-1)
    if scales_bits.size != M:
        raise RansError("rans_size_mismatch", "scales")
    tiles = tiles_of(w, M, K)
    n = tiles.shape[0] * tiles.shape[1]
    if n == 0:
        freq = normalize(np.zeros(256, np.uint64))
        return write_container(M, K, freq, scales_bits, [], checksums)
    chosen = choose_modes(tiles, modes)
    flat = tiles.reshape(n, TILE, TILE)
    sym = np.stack([predict(flat[i], chosen[i]) for i in range(n)])
    freq = normalize(histogram(sym))
    streams = encode_symbols(sym, freq)
    records = [TileRecord(chosen[i], streams[i], adler32(flat[i].tobytes())) for i in range(n)]
    return write_container(M, K, freq, scales_bits, records, checksums)


# ---------------------------------------------------------------------------------------------
# Reader: validation and decoding
# ---------------------------------------------------------------------------------------------

@dataclass
class Header:
    M: int
    K: int
    tiles_r: int
    tiles_c: int
    flags: int
    scales_offset: int
    meta_offset: int
    file_size: int
    freq: np.ndarray

    @property
    def n_tiles(self) -> int:
        return self.tiles_r * self.tiles_c


@dataclass
class Meta:
    data_offset: int
    data_size: int
    checksum: int
    mode: int
    reserved: bytes


def _u32(buf: bytes, off: int, count: int) -> np.ndarray:
    return np.frombuffer(buf, "<u4", count, off).astype(np.int64)


def tile_meta(buf: bytes, h: Header, index: int) -> Meta:
    off, size, ck, mode, res = _META.unpack_from(buf, h.meta_offset + META_SIZE * index)
    return Meta(off, size, ck, mode, res)


def check(buf: bytes) -> Header:
    """Validation in the spec's order: a cut file or another kind of file (magic, header length,
    version, file_size), the container checksum when flag bit 0 is set, then the structure: header
    fields, table, tile metadata, init states. Raises RansError; returns the parsed header."""
    buf = bytes(buf)
    n = len(buf)
    if n < 4:
        if MAGIC.startswith(buf):  # the empty file too
            raise RansError("rans_container_truncated", f"{n} bytes: the file ends in the magic")
        raise RansError("rans_bad_magic", repr(buf))
    if buf[:4] != MAGIC:
        raise RansError("rans_bad_magic", repr(buf[:4]))
    if n < HEADER_SIZE:
        raise RansError("rans_container_truncated", f"{n} bytes cannot hold the 64-byte header")
    (_, version, hsize, sbits, flags, lanes, trows, tcols, M, K, tr, tc, scales_offset,
     meta_offset, file_size, reserved) = _HEADER.unpack_from(buf, 0)
    if version != VERSION:
        raise RansError("rans_bad_header", f"version = {version}, expected {VERSION}")
    if file_size > n or n < TABLE_OFFSET + 512:
        raise RansError("rans_container_truncated", f"{n} bytes, the header says {file_size} "
                        "and no container has fewer than 576")
    sealed = bool(flags & FLAG_CHECKSUMS)
    if sealed:
        crc = container_crc(buf)
        have = struct.unpack_from("<II", buf, OFF_CRC)
        if have != (crc, crc ^ 0xFFFFFFFF):
            raise RansError("rans_container_checksum", f"stored {have[0]:#010x} / {have[1]:#010x}, "
                            f"the file's CRC-32 is {crc:#010x}")
    fields = [("header_size", hsize, HEADER_SIZE),
              ("scale_bits", sbits, SCALE_BITS), ("flags", flags & ~FLAG_CHECKSUMS, 0),
              ("lanes_per_tile", lanes, TILE), ("tile_rows", trows, TILE),
              ("tile_cols", tcols, TILE), ("tiles_r", tr, ceil_div(M, TILE)),
              ("tiles_c", tc, ceil_div(K, TILE)),
              ("reserved bytes 56..63 (no checksums)", 0 if sealed else reserved, 0),
              ("file_size", file_size, n)]
    for name, have, want in fields:
        if have != want:
            raise RansError("rans_bad_header", f"{name} = {have}, expected {want}")
    freq = np.frombuffer(buf, "<u2", 256, TABLE_OFFSET).astype(np.int64)
    if int(freq.sum()) != M_SCALE or not freq.any() or int(freq.max()) > M_SCALE:
        raise RansError("rans_bad_table", f"sum {int(freq.sum())}, max {int(freq.max())}")
    h = Header(M, K, tr, tc, flags, scales_offset, meta_offset, file_size, freq.astype(np.uint16))
    nt = h.n_tiles

    # Fixed regions: header + table, metadata, scales. Python integers: no overflow anywhere.
    regions = [(0, TABLE_OFFSET + 512, "header and table")]
    for name, off, size, align in (("metadata", meta_offset, META_SIZE * nt, 8),
                                   ("scales", scales_offset, 4 * M, 4)):
        if off % align or off + size > n:
            raise RansError("rans_bad_tile_meta", f"{name} region at {off} (+{size})")
        regions.append((off, off + size, name))
    metas = []
    for i in range(nt):
        m = tile_meta(buf, h, i)
        if m.data_offset % 16:
            raise RansError("rans_bad_tile_meta",
                            f"tile {i}: data_offset {m.data_offset} misaligned")
        if m.data_size < PAYLOAD_FIXED or m.data_offset + m.data_size > n:
            raise RansError("rans_bad_tile_meta", f"tile {i}: payload {m.data_offset} "
                            f"(+{m.data_size}) outside the file")
        if m.mode > 3:
            raise RansError("rans_bad_tile_meta", f"tile {i}: predictor {m.mode}")
        if any(m.reserved):
            raise RansError("rans_bad_tile_meta", f"tile {i}: nonzero reserved bytes")
        if m.checksum and not sealed:
            raise RansError("rans_bad_tile_meta", f"tile {i}: checksum {m.checksum:#x} without "
                            "flag bit 0")
        we = _u32(buf, m.data_offset + 4 * TILE, WARPS)
        if np.any(np.diff(we) < 0):
            raise RansError("rans_bad_tile_meta", f"tile {i}: warp_end decreases {we.tolist()}")
        if m.data_size != round16(PAYLOAD_FIXED + 2 * int(we[-1])):
            raise RansError("rans_bad_tile_meta", f"tile {i}: data_size {m.data_size} does not "
                            f"match warp_end[7] = {int(we[-1])}")
        regions.append((m.data_offset, m.data_offset + m.data_size, f"tile {i}"))
        metas.append(m)
    spans = sorted((a, b, name) for a, b, name in regions if b > a)
    for (a0, b0, n0), (a1, b1, n1) in zip(spans, spans[1:]):
        if a1 < b0:
            raise RansError("rans_bad_tile_meta", f"{n0} overlaps {n1}")
    for i, m in enumerate(metas):
        st = _u32(buf, m.data_offset, TILE)
        bad = (st < L) | (st >= STATE_END)
        if bad.any():
            lane = int(np.argmax(bad))
            raise RansError("rans_bad_state", f"tile {i} lane {lane}: {int(st[lane])}")
    return h


def decode_tile(buf: bytes, h: Header, index: int) -> np.ndarray:
    """One tile of a checked container: bytes [256, 256] with every decode-time check."""
    m = tile_meta(buf, h, index)
    init = _u32(buf, m.data_offset, TILE)
    we = _u32(buf, m.data_offset + 4 * TILE, WARPS)
    words = np.frombuffer(buf, "<u2", int(we[-1]), m.data_offset + PAYLOAD_FIXED)
    sym = decode_symbols(init, we, words, h.freq)
    tile = unpredict(sym, m.mode)
    i, j = divmod(index, h.tiles_c)
    rows, cols = min(TILE, h.M - TILE * i), min(TILE, h.K - TILE * j)
    if tile[rows:, :].any() or tile[:, cols:].any():
        raise RansError("rans_corrupt", f"tile {index}: nonzero bytes outside the matrix")
    if h.flags & FLAG_CHECKSUMS and adler32(tile.tobytes()) != m.checksum:
        raise RansError("rans_checksum", f"tile {index}")
    return tile


def decode(buf: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Container -> (W bytes uint8 [M, K], scales float32 bits uint32 [M])."""
    buf = bytes(buf)
    h = check(buf)
    pad = np.zeros((h.tiles_r * TILE, h.tiles_c * TILE), np.uint8)
    for idx in range(h.n_tiles):
        i, j = divmod(idx, h.tiles_c)
        pad[TILE * i:TILE * (i + 1), TILE * j:TILE * (j + 1)] = decode_tile(buf, h, idx)
    scales = np.frombuffer(buf, "<u4", h.M, h.scales_offset).astype(np.uint32)
    return pad[:h.M, :h.K].copy(), scales


# ---------------------------------------------------------------------------------------------
# Fused product (bit-exact order)
# ---------------------------------------------------------------------------------------------

def gemv(w: np.ndarray, scales_bits, x16: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """y[b, r] for W bytes [M, K], scales (float32 bits [M]) and x (fp16 bits [B, K]).

    Per tile column j: p_j = float32 sum, c ascending inside the tile, of float32(q) * float32(x),
    starting from +0.0f (the products are exact); t = p_0 + p_1 + ... in ascending j from +0.0f;
    y = float32(t * scale); returns (y float32 bits [B, M], RN16(y) bits [B, M]).
    Every step below is one float32 array operation, i.e. one IEEE rounding per element.
    """
    w = np.asarray(w, np.uint8)
    M, K = w.shape
    x16 = np.asarray(x16, np.uint16).reshape(-1, K)
    B = x16.shape[0]
    q = w.view(np.int8).astype(np.float32)                        # [M, K], exact
    xf = fp16.f32_values(fp16.f16_to_f32(x16)).reshape(B, K)      # [B, K], exact
    s = fp16.f32_values(np.asarray(scales_bits, np.uint32)).reshape(M)
    t = np.zeros((B, M), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(ceil_div(K, TILE)):
            p = np.zeros((B, M), np.float32)
            for c in range(TILE * j, min(K, TILE * (j + 1))):
                prod = xf[:, c:c + 1] * q[None, :, c]              # float32 [B, M]
                assert prod.dtype == np.float32
                p = p + prod
            t = t + p
        y = t * s[None, :]
    assert y.dtype == np.float32
    y32 = fp16.f32_bits(y)
    return y32, fp16.f32_to_f16(y32.reshape(-1)).reshape(B, M)


def gemv_container(buf: bytes, x16: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fused product of a container (x: fp16 bits [B, K], 1 <= B <= 16): validate and decode
    with every check, then the pinned order."""
    h = check(buf)
    x16 = np.asarray(x16, np.uint16)
    if x16.ndim != 2 or not 1 <= x16.shape[0] <= 16:
        raise RansError("rans_batch_out_of_range", f"x of shape {x16.shape}")
    if x16.shape[1] != h.K:
        raise RansError("rans_size_mismatch", f"x has {x16.shape[1]} columns, K = {h.K}")
    w, scales = decode(buf)
    return gemv(w, scales, x16)
