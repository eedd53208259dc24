#!/usr/bin/env python3
"""Writes the hand-made seed inputs of tests/fuzz/corpus/<target>/seed-*.

Each seed is a small program in the byte language its fuzz function reads
(frame_fuzz.cc, storage_fuzz.cc, meta_fuzz.cc; fuzz_input.h's encoding:
little-endian integers, one-byte length prefixes). Run it again after
changing a decoder; inputs the fuzzer found (other names) are kept.
Usage: tests/fuzz/make_seeds.py
"""
import os
import struct
import zlib  # noqa: F401  (crc32, not crc32c: see crc32c below)

HERE = os.path.dirname(os.path.abspath(__file__))


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def u8(v):
    return bytes([v & 0xFF])


def u32(v):
    return struct.pack('<I', v & 0xFFFFFFFF)


def u64(v):
    return struct.pack('<Q', v & 0xFFFFFFFFFFFFFFFF)


def blob(data):
    if len(data) < 0x80:
        return u8(len(data)) + data
    return u8(0x80 | (len(data) >> 8)) + u8(len(data) & 0xFF) + data


# --- protobuf, just enough for the frame headers ---
def varint(v):
    out = b''
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, value):
    if isinstance(value, bytes):
        return varint(num << 3 | 2) + varint(len(value)) + value
    return varint(num << 3) + varint(value)


def request_header(**kw):
    nums = dict(request_id=1, op=2, ino=3, chunk_index=4, offset=5, length=6,
                payload_crc32c=7, replace=8, trim_size=9, chunk_size=10, whole_store=11)
    return b''.join(field(nums[k], int(v)) for k, v in kw.items())


def frame(header, payload=b'', magic=0x31464B43, header_len=None, payload_len=None):
    return (u32(magic) + u32(len(header) if header_len is None else header_len) +
            u32(len(payload) if payload_len is None else payload_len) + header + payload)


WRITE, READ, TRIM, SYNC, PING = 1, 2, 3, 4, 5


def frame_seeds():
    data = b'0123456789abcdef' * 4
    w = frame(request_header(request_id=1, op=WRITE, ino=7, chunk_index=0,
                             payload_crc32c=crc32c(data)), data)
    r = frame(request_header(request_id=2, op=READ, ino=7, length=64))
    big_read = frame(request_header(request_id=3, op=READ, ino=7, offset=0xFFFFFFF0,
                                    length=0xFFFFFFFF))
    trim = frame(request_header(request_id=4, op=TRIM, ino=7, trim_size=10, chunk_size=4096))
    sync = frame(request_header(request_id=5, op=SYNC, whole_store=1))
    ping = frame(request_header(request_id=6, op=PING))
    response = frame(field(1, 9) + field(2, 2) + field(3, b'no such chunk'))
    chunk_header = (u32(0x31434B43) + u32(1) + u64(7) + u32(0) + u32(5) +
                    u32(crc32c(b'hello')))
    chunk_header += u32(crc32c(chunk_header)) + b'\0' * 32
    return {
        'write': w,
        'read': r,
        'stream': w + r + trim + sync + ping,
        'read-past-limit': big_read,
        'bad-magic': frame(request_header(request_id=1, op=PING), magic=0x20544547),
        'huge-header-len': frame(b'', header_len=0xFFFFFFFF),
        'huge-payload-len': frame(request_header(request_id=1, op=WRITE),
                                  payload_len=(64 << 20) + 1),
        'truncated': w[:len(w) // 2],
        'bad-protobuf': frame(b'\xff\xff\xff\xff\x0f'),
        'response': response + response,
        'chunk-header': chunk_header,
    }


# --- storage programs (storage_fuzz.cc) ---
def s_write(data, ino=0, index=0, offset=b'\0', flags=0, crc=None):
    out = u8(0) + u8(flags) + u8(ino) + u8(index) + offset + blob(data)
    if flags & 4:
        out += u32(crc if crc is not None else 0xDEADBEEF)
    return out


def s_read(ino=0, index=0, offset=b'\0', length=u8(0) + u32(100), flags=0):
    return u8(1) + u8(flags) + u8(ino) + u8(index) + offset + length


def s_trim(size, chunk_sel=b'\x02\x00', ino=0, flags=0):
    return u8(2) + u8(flags) + u8(ino) + u8(0) + (u64(size) if flags & 4 else u32(size)) + chunk_sel


def off_small(v):
    return u8(1) + u32(v)


def storage_seeds():
    hello = b'hello, chunk'
    return {
        'write-read': s_write(hello) + s_read(),
        'merge-trim': (s_write(hello) + s_write(b'x' * 100, offset=off_small(5000)) +
                       s_read(length=u8(0) + u32(9000)) + s_trim(3000) +
                       s_read(length=u8(0) + u32(9000)) + s_trim(0, b'\x00') + s_read()),
        'errors': (s_write(hello, flags=4) + s_write(hello, flags=1) +
                   s_write(hello, flags=8, offset=off_small(10)) +
                   u8(5) + u8(0) + u8(0) + u8(0) + u32(99) + u32(0) + u32(0) + blob(b'') +
                   s_read(offset=u8(3) + u32(0), length=u8(2)) +
                   s_trim(10, b'\x00') + u8(4) + u8(0) + u8(0) + u8(0) +
                   u8(3) + u8(16) + u8(0) + u8(0) + u8(3) + u8(0) + u8(1) + u8(0)),
        'damage': (s_write(hello * 50) + u8(6) + u8(0) + u8(0) + u8(0) + u32(4100) + u8(1) +
                   s_read(length=u8(1) + u32(0xFFFFFFFF)) + s_write(b'y', offset=off_small(3)) +
                   s_write(hello, flags=8) + s_read()),
        'other-chunks': (s_write(hello, ino=1, index=1) + s_write(hello, ino=250, index=250) +
                         u64(1 << 63) + u32(7) + s_read(ino=1, index=1) +
                         s_trim(1 << 40, b'\x01' + u32(0xFFFFFFFF), ino=1, flags=4)),
    }


# --- metadata programs (meta_fuzz.cc) ---
def name(k):  # dictionary name k: a, b, c, run, ckpt-1, ckpt-2, latest, shard.pt
    return u8(9 | (k << 4))


SLASH, DOT, DOTDOT, NUL, LONG256, LONG255 = u8(1), u8(2), u8(3), u8(5), u8(6), u8(7)
ROOT = u8(0)


def ino(i):  # the i-th inode the replies named (0: the root)
    return u8(i)


def mkdir(parent, nm):
    return u8(4) + parent + nm + u32(0o755)


def create(parent, nm, flags=0):
    return u8(3) + parent + nm + u32(0o644) + u8(flags)


def meta_seeds():
    run, ckpt, shard = ino(1), ino(2), ino(3)
    tree = mkdir(ROOT, name(3)) + mkdir(run, name(4)) + create(ckpt, name(7))
    return {
        'tree': tree + u8(10) + ROOT + u8(0) + u8(2) + u8(10) + run + u8(1) + name(0) + u8(3),
        'checkpoint': (tree + u8(18) + ckpt + u8(3) + u8(1) + u8(0) +   # declare 2 ranks
                       u8(19) + ckpt + u8(0) + u8(0) + u8(19) + ckpt + u8(0) + u8(1) +
                       u8(12) + shard + u8(0) + u32(100) + u64(0) + u8(0) +
                       u8(23) + ckpt + u8(21) + run + u8(20) + ckpt +
                       u8(22) + run + name(4)),
        'invalid-names': (mkdir(ROOT, SLASH) + mkdir(ROOT, DOT) + mkdir(ROOT, DOTDOT) +
                          mkdir(ROOT, NUL) + mkdir(ROOT, LONG256) + mkdir(ROOT, LONG255) +
                          create(ROOT, u8(0)) + u8(5) + ROOT + name(0) + u8(1) +
                          u8(9) + ROOT + LONG255 + ROOT + LONG256 + u8(0)),
        'unknown-ids': (u8(1) + u8(255) + u64(1 << 60) + u8(0) + u8(230) + name(0) +
                        u8(10) + u8(201) + u8(0) + u8(2) + u8(7) + u8(240) + name(1) +
                        u8(18) + u8(220) + u8(3) + u8(0) + u8(19) + u8(255) + u64(3) +
                        u8(1) + u32(0xFFFFFFFF)),
        'xattrs': (mkdir(ROOT, name(0)) + u8(13) + run + u8(4) + u8(0) + u8(0) + u8(0) +
                   u8(13) + run + u8(0) + u8(1) + blob(b'12345') + u8(0) + u8(0) +
                   u8(13) + run + u8(2) + u8(1) + blob(b'v') + u8(0) + u8(0) +
                   u8(14) + run + u8(1) + u8(15) + run + u8(16) + run + u8(1)),
        'rename-symlink': (tree + u8(9) + ckpt + name(7) + run + name(0) + u8(0) +
                           u8(5) + run + name(1) + u8(3) + blob(b'target') +
                           u8(6) + ino(4) + u8(9) + ROOT + name(3) + run + name(2) + u8(0) +
                           u8(7) + run + name(1) + u8(8) + run + name(4)),
    }


def main():
    for target, seeds in (('frame', frame_seeds()), ('storage', storage_seeds()),
                          ('meta', meta_seeds())):
        d = os.path.join(HERE, 'corpus', target)
        os.makedirs(d, exist_ok=True)
        for n, data in seeds.items():
            with open(os.path.join(d, 'seed-' + n), 'wb') as f:
                f.write(data)
        print(target, len(seeds), 'seeds')


if __name__ == '__main__':
    main()
