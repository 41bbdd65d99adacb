#!/usr/bin/python3
"""KV cache events end to end, as a prefix-aware router sees them: `serve --kv-events-config` publishes vLLM's ZeroMQ
messages; this test subscribes with Python's ZeroMQ and msgpack (Debian's python3-zmq, python3-msgpack), sends prompts
with shared prefixes, and checks the stored blocks' token ids, the parent-hash chain, every hash recomputed here with
cbor2 + hashlib as vLLM's sha256_cbor does, removals under a small KV budget, the cleared event on /flush_cache, a
replay after a deliberate gap, and the publisher's counters in /metrics.

usage: kv_events_test.py RADIXSERVE MODEL_DIR   (run with Debian's /usr/bin/python3, which has zmq, msgpack, cbor2)"""
import hashlib
import json
import os
import socket
import sys
import time
import urllib.request

import cbor2
import msgpack
import zmq

from radixserve_server import Server
from test_checks import check, fail

PAGE = 16
SEED = "1234"
NONE_HASH = hashlib.sha256(cbor2.dumps(SEED, canonical=True)).digest()


def block_hash(parent: bytes, tokens) -> bytes:
    return hashlib.sha256(cbor2.dumps((parent, tuple(tokens), None), canonical=True)).digest()


def external(digest: bytes) -> int:
    return int.from_bytes(digest, "big") & ((1 << 64) - 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Index:
    """What an external indexer keeps: every live block by its 64-bit hash, with its full digest and token prefix."""

    def __init__(self, prompts: list):
        self.prompts = prompts
        self.blocks = {}  # external hash -> (digest, prefix tokens)
        self.stored = self.removed = self.cleared = 0

    def apply(self, batch) -> None:
        check(isinstance(batch, list) and len(batch) == 3, f"EventBatch is [ts, events, dp_rank]: {batch!r:.200}")
        ts, events, rank = batch
        check(isinstance(ts, float) and abs(ts - time.time()) < 600 and rank == 0, f"ts {ts}, rank {rank}")
        for event in events:
            kind = event[0]
            if kind == "BlockStored":
                self.on_stored(event)
            elif kind == "BlockRemoved":
                check(len(event) == 3 and event[2] == "CPU", f"BlockRemoved layout: {event!r:.200}")
                for h in event[1]:
                    check(h in self.blocks, f"removed block {h} was never stored (or already removed)")
                    del self.blocks[h]
                    self.removed += 1
            elif kind == "AllBlocksCleared":
                check(len(event) == 1, f"AllBlocksCleared layout: {event!r}")
                self.blocks.clear()
                self.cleared += 1
            else:
                fail(f"unknown event {event!r:.200}")

    def on_stored(self, event) -> None:
        check(len(event) == 8, f"BlockStored has 8 fields (tag + 7): {event!r:.200}")
        _, hashes, parent, tokens, block_size, lora_id, medium, lora_name = event
        check(block_size == PAGE and lora_id is None and lora_name is None and medium == "CPU",
              f"block_size {block_size}, lora {lora_id}/{lora_name}, medium {medium}")
        check(len(tokens) == len(hashes) * PAGE, f"{len(tokens)} token ids for {len(hashes)} blocks")
        if parent is None:
            digest, prefix = NONE_HASH, []
        else:
            check(parent in self.blocks, f"parent {parent} is not a live block")
            digest, prefix = self.blocks[parent]
        for i, h in enumerate(hashes):
            page = tokens[i * PAGE:(i + 1) * PAGE]
            digest = block_hash(digest, page)
            prefix = prefix + page
            check(h == external(digest), f"block {i}: hash {h} != sha256_cbor recomputed {external(digest)}")
            check(any(p[:len(prefix)] == prefix or prefix[:len(p)] == p for p in self.prompts),
                  f"stored tokens {prefix[:20]}... continue no prompt that was sent")
            self.blocks[h] = (digest, prefix)
            self.stored += 1


def receive(sub, timeout_s: float):
    """[(sequence, payload)] until nothing arrives for timeout_s."""
    out = []
    while sub.poll(int(timeout_s * 1000)):
        topic, seq, payload = sub.recv_multipart()
        check(topic == b"kv", f"topic {topic!r}")
        out.append((int.from_bytes(seq, "big"), payload))
    return out


def settle(sub, quiet: bool):
    """A PUB socket drops what it sends before the subscription reaches it, and a SUB socket passes its subscription
    on only while its commands are processed: poll for half a second. Before any request nothing may arrive (quiet);
    later, the events of a request that already answered may still be on their way (the scheduler inserts a finished
    request into the cache after its last token was sent), so what arrives is returned as part of the stream."""
    out = []
    for _ in range(10):
        if sub.poll(50):
            check(not quiet, "an event arrived before any request")
            topic, seq, payload = sub.recv_multipart()
            check(topic == b"kv", f"topic {topic!r}")
            out.append((int.from_bytes(seq, "big"), payload))
    return out


def complete(url: str, prompt: list) -> None:
    body = json.dumps({"prompt": prompt, "max_tokens": 1, "temperature": 0}).encode()
    request = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=60).read()


def main() -> None:
    binary, model = sys.argv[1], sys.argv[2]
    pub_port, replay_port = free_port(), free_port()
    config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{pub_port}",
              "replay_endpoint": f"tcp://*:{replay_port}", "topic": "kv", "buffer_steps": 10000}
    os.environ["PYTHONHASHSEED"] = SEED
    # ~40 pages of 16 tokens: a dozen 5-page prompts must evict.
    server = Server(binary, model, ["--load-format", "dummy", "--page-size", str(PAGE), "--kv-cache-gb", "0.001",
                                    "--context-length", "256", "--kv-events-config", json.dumps(config)])
    context = zmq.Context()
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"kv")
    sub.connect(f"tcp://127.0.0.1:{pub_port}")
    settle(sub, quiet=True)

    shared = list(range(1, 41))  # 2.5 pages
    prompts = [shared, shared[:32] + list(range(300, 324))]
    index = Index(prompts)
    for prompt in prompts:
        complete(server.url, prompt)
    received = receive(sub, 1.0)
    check(received, f"no KV events arrived:\n{server.text()}")
    for _, payload in received:
        index.apply(msgpack.unpackb(payload, raw=False))
    check(index.stored >= 3, f"only {index.stored} blocks stored for two prompts sharing two pages")
    shared_pages = [h for h, (_, prefix) in index.blocks.items() if prefix == shared[:32]]
    check(len(shared_pages) == 1, "the second prompt's blocks do not chain to the shared two pages")
    last_seq = received[-1][0]
    check([s for s, _ in received] == list(range(received[0][0], last_seq + 1)), "sequence numbers have holes")

    # A deliberate gap: no subscriber while a dozen 5-page prompts overflow the ~40-page pool.
    sub.close(linger=0)
    more = [[(100 + 31 * i + t) % 500 + 1 for t in range(80)] for i in range(12)]  # ids < the vocabulary (512)
    index.prompts += more
    for prompt in more:
        complete(server.url, prompt)
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"kv")
    sub.connect(f"tcp://127.0.0.1:{pub_port}")
    late = settle(sub, quiet=False)
    flush = urllib.request.Request(server.url + "/flush_cache", data=b"", method="POST")
    urllib.request.urlopen(flush, timeout=30).read()
    after_gap = late + receive(sub, 1.0)
    check(after_gap, "no event after /flush_cache")
    first_after = after_gap[0][0]
    check(first_after > last_seq + 1, f"expected missed sequence numbers between {last_seq} and {first_after}")

    # Replay what was missed: ROUTER request [empty, 8-byte start]; replies [empty, seq, payload] until seq -1.
    dealer = context.socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{replay_port}")
    dealer.send_multipart([b"", (last_seq + 1).to_bytes(8, "big")])
    replayed = []
    while True:
        check(dealer.poll(5000), "the replay socket did not answer")
        empty, seq, payload = dealer.recv_multipart()
        if int.from_bytes(seq, "big", signed=True) == -1:
            check(payload == b"", "the end-of-replay message carries a payload")
            break
        replayed.append((int.from_bytes(seq, "big"), payload))
    check([s for s, _ in replayed][:first_after - last_seq - 1] == list(range(last_seq + 1, first_after)),
          f"replay returned sequences {[s for s, _ in replayed][:8]}... for a gap {last_seq + 1}..{first_after - 1}")
    replayed_by_seq = dict(replayed)
    for seq, payload in after_gap:
        check(replayed_by_seq.get(seq, payload) == payload, f"replayed batch {seq} differs from the published one")
    for seq in range(last_seq + 1, first_after):
        index.apply(msgpack.unpackb(replayed_by_seq[seq], raw=False))
    check(index.removed > 0, f"{index.stored} blocks stored and none removed under a ~40-page budget")
    for _, payload in after_gap:
        index.apply(msgpack.unpackb(payload, raw=False))
    check(index.cleared == 1 and not index.blocks, f"after /flush_cache: {index.cleared} cleared, "
          f"{len(index.blocks)} blocks still live")

    metrics = urllib.request.urlopen(server.url + "/metrics", timeout=10).read().decode()
    published = [line for line in metrics.splitlines() if line.startswith("radixserve_kv_events_published_total")]
    dropped = [line for line in metrics.splitlines() if line.startswith("radixserve_kv_events_dropped_total")]
    check(published and float(published[0].split()[-1]) >= first_after + 1, f"published counter: {published}")
    check(dropped and float(dropped[0].split()[-1]) == 0, f"dropped counter: {dropped}")
    server.stop()
    print(f"KV events: {index.stored} blocks stored, {index.removed} removed, cleared once; "
          f"{first_after - last_seq - 1} batches replayed after a gap; every hash recomputed with sha256_cbor")


if __name__ == "__main__":
    main()
