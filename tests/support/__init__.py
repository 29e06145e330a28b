"""Helpers shared by the test suite: fake servers (model, Bot API, embeddings), the
kernel harness, storage backends, crash children and the kits of each area. Tests
import them as ``support.NAME``; nothing here is collected as a test."""
