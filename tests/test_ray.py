"""The Ray Data adapter on a local Ray (2 CPUs, no dashboard): every row comes back once, with the labels
``koelectra-kit label`` gives the same file."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

ray = pytest.importorskip("ray", reason="the Ray adapter's test needs ray[data] (pip install -e '.[dev]')")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _reviews(sample_dir, tmp_path):
    """The sample's 60 reviews and 40 exact repeats of them, each row with its own id."""
    orig = pd.read_csv(sample_dir / "reviews_unlabelled.csv", dtype=str, keep_default_na=False)
    rows = pd.concat([orig, orig.sample(40, replace=True, random_state=0)], ignore_index=True)
    rows["id"] = [f"r{i:03d}" for i in range(len(rows))]
    src = tmp_path / "reviews.csv"
    rows.to_csv(src, index=False)
    return src


def test_ray_adapter_labels_every_row_once_like_label(local_ray, tmp_path, tiny_classifier, tiny_classifier_dir,
                                                      sample_dir):
    from koelectra_kit.label import label_file
    from koelectra_kit.label.ray_adapter import label_dataset
    from koelectra_kit.io.tables import read_table

    src = _reviews(sample_dir, tmp_path)
    label_file(None, src, tmp_path / "ref.csv", "review", classifier=tiny_classifier, progress=False)
    ref = pd.read_csv(tmp_path / "ref.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")

    table = read_table(src)
    ds = ray.data.from_pandas([table[i:i + 25] for i in range(0, len(table), 25)])  # 4 blocks for 2 actors
    labelled = label_dataset(ds, str(tiny_classifier_dir), "review", concurrency=2, batch_rows=16,
                             device="cpu", precision="fp32", threads=1)
    got = labelled.to_pandas()

    assert sorted(got["id"]) == sorted(ref["id"]) and got["id"].is_unique  # every row once
    got = got.set_index("id").loc[ref["id"]]
    assert got["label"].tolist() == ref["label"].tolist()
    assert got["status"].tolist() == ref["status"].tolist()
    assert got["review"].tolist() == ref["review"].tolist()
    for col in ("prob_negative", "prob_neutral", "prob_positive"):
        want = pd.to_numeric(ref[col].replace("", np.nan)).to_numpy(dtype=float)
        np.testing.assert_allclose(got[col].to_numpy(dtype=float, na_value=np.nan), want, atol=1e-4)


def test_ray_refuses_before_any_actor_starts_and_flags_cells_as_label(local_ray, tmp_path, tiny_classifier_dir):
    """Ray reported a mistyped option, a folder that is no model or a missing column from a dead actor (wrapped in its
    own exceptions, after its start-up); a list, dict or binary cell came back status "empty" (label says why)."""
    from koelectra_kit.errors import ConfigError, InputError
    from koelectra_kit.label.ray_adapter import label_dataset

    ds = ray.data.from_pandas(pd.DataFrame({"review": ["좋아요 최고", "별로"]}))
    model = str(tiny_classifier_dir)
    with pytest.raises(ConfigError, match="unknown option\\(s\\) precison"):
        label_dataset(ds, model, precison="fp32")
    with pytest.raises(ConfigError, match="batch_rows=None"):
        label_dataset(ds, model, batch_rows=None)
    with pytest.raises(ConfigError, match="precision='fp8'"):
        label_dataset(ds, model, precision="fp8")
    with pytest.raises(InputError, match="not a model folder"):
        label_dataset(ds, str(tmp_path))
    with pytest.raises(InputError, match="no column 'text'"):
        label_dataset(ds, model, text_column="text")
    with pytest.raises(ConfigError, match="model=None"):  # was str(None): every actor failed on a folder "None"
        label_dataset(ds, None)
    with pytest.raises(ConfigError, match="text_column=3"):
        label_dataset(ds, model, text_column=3)
    import pyarrow as pa

    for column, status in (([["최고", "굿"], []], "error: the text is a JSON array, not a string"),
                           (pa.array([b"\xff\xfe bad", b"\xc3"], type=pa.binary()),
                            "error: the text is binary data, not UTF-8 text")):
        cells = ray.data.from_arrow(pa.table({"id": [1, 2], "review": column}))
        got = label_dataset(cells, model, device="cpu", precision="fp32", threads=1).to_pandas()
        assert got["status"].tolist() == [status] * 2
