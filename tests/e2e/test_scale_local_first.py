"""A local model on the PostgreSQL scale-out (issue 47): the worker that runs turns
warms the prompt prefix (the channels process, which runs none, does not), and the
everyday sentences are answered by the worker's memory and scheduler without a model
call, their replies and the reminder's firing reaching the person through the
channels process. Real `main.py` processes on PostgreSQL (skipped without it)."""

from __future__ import annotations

import yaml

from support.bundled import copy_bundled
from support.fake_openai import FakeOpenAIServer
from support.kernel_process import wait_until
from support.scale_support import CHANNEL, CHANNEL_ID, CHANNEL_MANIFEST, Cluster

SENTENCES = [
    ("u1", "Please remember that my cat is called Miso."),
    ("u1", "Remind me in 2 seconds to water the plants."),
]


def test_a_worker_warms_the_prefix_and_answers_everyday_sentences_locally(
    make_ext, ext_root, tmp_path, postgres_dsn
):
    copy_bundled(ext_root, "memory", "scheduler")
    make_ext(CHANNEL_ID, CHANNEL, CHANNEL_MANIFEST)
    with FakeOpenAIServer() as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv, SENTENCES)
        try:
            for name, role in (("worker", "workers"), ("front", "channels")):
                path = cluster.settings_for(name, role)
                data = yaml.safe_load(path.read_text())
                data["extensions"]["memory"] = {"embeddings": {"backend": "none"}}
                path.write_text(yaml.safe_dump(data, sort_keys=False))
            cluster.start("worker", "workers")
            cluster.wait_log("worker", "kernel ready")
            cluster.start("front", "channels")
            wait_until(
                lambda: (
                    any("water the plants" == r["text"].strip() for r in cluster.replies())
                    or len(cluster.replies()) >= 3
                ),
                90,
                lambda: f"{cluster.replies()}\n{cluster.log('worker')[-3000:]}",
            )
            cluster.wait_log("worker", "prompt warm-up")
        finally:
            codes = cluster.stop_all()
        requests, warmups = srv.requests, srv.warmups
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    texts = [r["text"] for r in cluster.replies()]
    assert texts[0] == "I'll remember that (#1): The user's cat is called Miso.", texts
    assert texts[1].startswith("Reminder #1 set for "), texts
    assert any("water the plants" in t for t in texts[2:]), texts  # fired, delivered
    assert requests == []  # no sentence needed the model
    assert len(warmups) >= 1  # the worker's warm-up
    assert "prompt warm-up" not in cluster.log("front")  # it runs no turns: nothing to warm
