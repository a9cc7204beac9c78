"""Real test frames captured off an interface, and the Internet checksum to
check them with (shared by the tests that look at what the generator built)."""
import struct

# Captures the first N UDP test frames (ports 7..1030, after the SUT's own
# traffic) on an interface; a large socket buffer keeps up with a burst.
CAPTURE = r"""
import json, socket, sys
ifname, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
s.bind((ifname, 0))
s.settimeout(20)
print("ready", flush=True)
frames = []
while len(frames) < n:
    f = s.recv(2048)
    v4 = f[12:14] == b"\x08\x00" and f[23] == 17 and 7 <= int.from_bytes(f[36:38], "big") < 1031
    v6 = f[12:14] == b"\x86\xdd" and f[20] == 17 and 7 <= int.from_bytes(f[56:58], "big") < 1031
    if v4 or v6:
        frames.append(f.hex())
print(json.dumps(frames), flush=True)
"""


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return total
