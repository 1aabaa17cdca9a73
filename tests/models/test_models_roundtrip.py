from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.models.encoder import encode, make_student


def test_saved_student_loads_without_babelspace(tiny_model_dir, tiny_teacher_dir, tmp_path) -> None:
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    student = make_student(str(tiny_model_dir), teacher, projection="always")
    texts = ["the king of the land", "der könig", "le roi"]
    ours = encode(student, texts)
    out = tmp_path / "saved"
    student.save(str(out))
    script = textwrap.dedent(
        f"""
        import sys, numpy as np
        from sentence_transformers import SentenceTransformer
        m = SentenceTransformer({str(out)!r}, device="cpu")
        v = m.encode({texts!r}, normalize_embeddings=True, convert_to_numpy=True)
        assert "babelspace" not in sys.modules
        np.save({str(tmp_path / "v.npy")!r}, v)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path)
    theirs = np.load(tmp_path / "v.npy")
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
