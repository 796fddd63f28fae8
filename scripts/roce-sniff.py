#!/usr/bin/env python3
"""roce-sniff.py IFACE SECONDS: counts the RoCE v2 packets (UDP port 4791) seen on
IFACE, for the path flags' checks in scripts/softroce-test.sh (where no tcpdump
is installed). Prints one line per distinct header, at the end (SECONDS, or
SIGTERM/SIGINT), e.g.
    ipv4 10.99.0.1 > 10.99.0.2 tos 0x60 ttl 7 pkey 0xffff: 212
    ipv6 ::1 > ::1 tclass 0x28 flow 0x12345 hop 64 pkey 0xffff: 40
Needs root (a raw AF_PACKET socket)."""
import ipaddress
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
ROCE_V2_PORT = 4791


def header(frame):
    """The summary key of one Ethernet frame, or None when it is no RoCE v2 packet."""
    if len(frame) < 14:
        return None
    (ethertype,) = struct.unpack("!H", frame[12:14])
    ip = frame[14:]
    if ethertype == 0x0800 and len(ip) >= 20 and ip[9] == 17:
        ihl = (ip[0] & 0x0F) * 4
        udp = ip[ihl:]
        if len(udp) < 20 or struct.unpack("!H", udp[2:4])[0] != ROCE_V2_PORT:
            return None
        src, dst = ipaddress.ip_address(ip[12:16]), ipaddress.ip_address(ip[16:20])
        pkey = struct.unpack("!H", udp[10:12])[0]
        return f"ipv4 {src} > {dst} tos {ip[1]:#04x} ttl {ip[8]} pkey {pkey:#06x}"
    if ethertype == 0x86DD and len(ip) >= 40 and ip[6] == 17:
        (word,) = struct.unpack("!I", ip[0:4])
        udp = ip[40:]
        if len(udp) < 20 or struct.unpack("!H", udp[2:4])[0] != ROCE_V2_PORT:
            return None
        src, dst = ipaddress.ip_address(ip[8:24]), ipaddress.ip_address(ip[24:40])
        pkey = struct.unpack("!H", udp[10:12])[0]
        return (f"ipv6 {src} > {dst} tclass {(word >> 20) & 0xFF:#04x} "
                f"flow {word & 0xFFFFF:#x} hop {ip[7]} pkey {pkey:#06x}")
    return None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    iface, seconds = sys.argv[1], float(sys.argv[2])
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((iface, 0))
    sock.settimeout(0.2)
    counts = {}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    print(f"roce-sniff: listening on {iface}", flush=True)
    end = time.monotonic() + seconds
    while not stop and time.monotonic() < end:
        try:
            frame, addr = sock.recvfrom(65535)
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        # Each packet once: lo shows it outgoing and incoming.
        if iface == "lo" and addr[2] == socket.PACKET_OUTGOING:
            continue
        key = header(frame)
        if key:
            counts[key] = counts.get(key, 0) + 1
    for key, n in sorted(counts.items()):
        print(f"{key}: {n}")
    if not counts:
        print("roce-sniff: no RoCE v2 packet seen")


if __name__ == "__main__":
    main()
