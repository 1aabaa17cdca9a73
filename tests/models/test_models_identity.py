"""One answer to "which model is this": every cache and report keys a model through
:func:`babelspace.models.identity.model_identity`."""

from __future__ import annotations

import shutil
from pathlib import Path

from sentence_transformers import SentenceTransformer

from babelspace.hashing import model_content_hash
from babelspace.integrations.mteb.runner import mteb_name_and_revision
from babelspace.mining.guards import shard_identity
from babelspace.models.identity import model_identity
from babelspace.training.setup.teacher_cache import teacher_key


def test_a_local_folder_is_its_content_and_a_hub_id_its_name(tiny_model_dir: Path) -> None:
    local = model_identity(str(tiny_model_dir))
    assert local.folder == tiny_model_dir and local.content_hash == model_content_hash(tiny_model_dir)
    assert local.key() == f"{tiny_model_dir}@{local.content_hash}"
    assert local.key("onnx-int8") == f"{tiny_model_dir}@{local.content_hash}+onnx-int8"
    hub = model_identity("some-org/some-model")
    assert (hub.folder, hub.content_hash, hub.key()) == (None, None, "some-org/some-model")


def test_every_consumer_changes_when_the_weights_change_in_place(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    shutil.copytree(tiny_model_dir, folder)

    def keys() -> tuple[str, ...]:
        model = SentenceTransformer(str(folder), device="cpu")
        return (
            model_identity(str(folder)).key(),
            shard_identity(str(folder)),
            mteb_name_and_revision(str(folder))[1],
            teacher_key(model, str(folder)),
        )

    before = keys()
    assert before[1] == before[0] and before[2] == model_identity(str(folder)).content_hash[:16]
    weights = next(folder.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # same size, other bytes
    weights.write_bytes(bytes(data))
    after = keys()
    assert all(a != b for a, b in zip(before, after, strict=True))
