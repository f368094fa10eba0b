"""Shared test setup. Stage-specific fixtures live in ``tests/fixtures_<stage>.py`` (loaded below)
so each stage's fixtures sit beside its tests' owner without one huge conftest."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# One thread per test process: on a 2-core machine torch's default of all cores thrashes when
# kiwipiepy workers or a second test process run beside it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never touch the network
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# no kiwi_word word file carried from one test (or its subprocesses) to the next: tests/test_wordfile.py turns it on
os.environ["KOELECTRA_WORD_FILE"] = "0"
# Caches (Kiwi pre-split, packed ids, fine-tune tokens) go to a fresh folder per test session, never the
# user's ~/.cache: a test must not reuse, or leave behind, another run's cache entries.
os.environ["KOELECTRA_CACHE"] = tempfile.mkdtemp(prefix="koelectra-kit-tests-")

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "corpora" / "sample"
SHARED_DATA = Path(os.environ.get("KOELECTRA_SHARED_DATA", ROOT.parent / "shared" / "data"))

pytest_plugins = sorted(f"tests.{p.stem}" for p in Path(__file__).parent.glob("fixtures_*.py"))


# Test tiers (issue 40). The README's command (`python -m pytest`) runs the default tier: everything but `slow`
# (real data, minutes) and `extended`. `extended` is the tests below: whole-program runs whose parts a default test
# covers at a smaller scale (every README/docs code block, example scripts, a wheel install), subprocess and
# multi-process runs (torchrun, Ray, datasets workers, a fresh process per word-file case), real browsers beyond
# test_app.py's, fuzzing and 10,000-text golden files. `.ci/run` runs `python -m pytest -m extended` right after the
# README's command, so CI runs every test the default run ran before the split. `-m fast` (FAST_MODULES, plus tests
# marked fast in their files) is the inner loop: unit tests on the bundled sample, seconds each.
# tests/test_tiers.py checks that every name here is a test that exists.
EXTENDED_MODULES = {"tests/test_teach_browser.py", "tests/test_analyst_browser.py", "tests/test_ray.py",
                    "tests/test_label_fuzz.py", "tests/test_install.py"}
EXTENDED_TESTS = {
    "tests/test_docs.py::test_doc_blocks_run", "tests/test_docs.py::test_example_pipeline_runs",
    "tests/test_gpu_check.py::test_every_stage_runs_dry_on_the_cpu_and_leaves_its_figures",
    "tests/test_gpu_check.py::test_a_stage_that_cannot_run_is_one_line_and_the_others_go_on",
    "tests/test_gpu_check.py::test_the_bundle_has_the_shared_datas_layout_and_says_the_device_command",
    "tests/test_gpu_check.py::test_a_quality_lease_packs_its_run_and_tables_what_it_fine_tuned",
    "tests/test_gpu_check.py::test_the_profile_stage_says_where_the_compiled_steps_time_goes",
    "tests/test_gpu_check.py::test_the_resume_stage_stops_a_fine_tune_and_continues_it",
    "tests/test_pretrain_step.py::test_a_compiled_run_trains_as_the_eager_one",
    "tests/test_pretrain_step.py::test_the_compiled_step_has_no_reason_to_skip_cuda_graphs",
    "tests/test_distill.py::test_budget_recipe_script_smoke_run",
    "tests/test_golden.py::test_tokenizer_output_on_10000_real_texts_is_unchanged",
    "tests/test_hf_tokenizer.py::test_datasets_map_with_worker_processes",
    "tests/test_hf_tokenizer.py::test_without_the_import_loading_fails_naming_the_package",
    "tests/test_hf_tokenizer.py::test_import_registers_without_loading_transformers",
    "tests/test_pretrain.py::test_torchrun_two_cpu_processes_hold_identical_weights",
    "tests/test_launch.py::test_two_cpu_ranks_train_in_sync_and_a_failing_job_says_one_line",
    "tests/test_ddp_stop.py::test_sigterm_on_two_ranks_stops_them_at_one_step_and_a_resume_continues_exactly",
    "tests/test_ddp_stop.py::test_a_second_ctrl_c_stops_every_rank_at_once_in_one_line",
    "tests/test_ddp_stop.py::test_label_on_two_ranks_stopped_by_sigterm_resumes_to_one_processs_bytes",
    "tests/test_launch.py::test_label_on_two_ranks_writes_one_processs_bytes_and_a_refusal_is_one_line",
    "tests/test_label_torchrun.py::test_two_processes_write_the_unsharded_runs_bytes_report_the_whole_file_and_resume",
    "tests/test_label_torchrun.py::test_the_ranks_benchmark_times_both_commands_and_compares_their_labels",
    "tests/test_wordfile.py::test_the_next_process_starts_with_the_words_and_gets_the_same_ids",
    "tests/test_wordfile.py::test_a_damaged_file_is_ignored_with_one_warning_and_replaced",
    "tests/test_wordfile.py::test_a_cache_folder_that_cannot_be_written_never_fails_the_run",
    "tests/test_tokenizer.py::test_odd_lines_do_not_break_training",
    "tests/test_teach.py::test_from_an_encoder_rounds_fit_tfidf_until_2000_labels_unless_asked_for_the_full_recipe",
    "tests/test_teach.py::test_a_retrain_serves_the_best_folder_and_the_suggestions_come_from_it",
    "tests/test_teach.py::test_a_failed_retrain_keeps_the_old_model_serving",
    "tests/test_bench_device.py::test_finetune_bench_cuda_graphs_variants_run_the_recipes_steps",
    "tests/test_teach.py::test_a_tfidf_start_keeps_what_it_knew_and_the_held_out_labels_stay_held_out",
}
FAST_MODULES = {
    "tests/test_config.py", "tests/test_tables.py", "tests/test_corpus.py", "tests/test_moved_paths.py",
    "tests/test_layering.py", "tests/test_pretrain_units.py", "tests/test_finetune_data.py", "tests/test_baseline.py",
    "tests/test_label.py", "tests/test_suggest.py", "tests/test_bad_input_more.py", "tests/test_pretrain_init.py",
    "tests/test_normalize.py", "tests/test_tokenizer_fallback.py", "tests/test_hf_inputs.py",
    "tests/test_tfidf_ensemble.py", "tests/test_tiers.py", "tests/test_gpu_path.py",
}


@pytest.hookimpl(tryfirst=True)  # before -m reads the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        module, _, name = item.nodeid.partition("::")
        if module in EXTENDED_MODULES or f"{module}::{name.split('[')[0]}" in EXTENDED_TESTS:
            item.add_marker(pytest.mark.extended)
        elif module in FAST_MODULES and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.fast)


def pytest_configure(config):
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real Korean data beside the repository ($KOELECTRA_SHARED_DATA); tests needing it skip when it is absent (fresh clones)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not available at {SHARED_DATA} (set KOELECTRA_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture
def terminal_sigint():
    """SIGINT raising KeyboardInterrupt, as in a terminal, for a test that sends its own process a real one:
    pytest started as a background job (``pytest &`` in a script, nohup, some CI runners) inherits SIGINT ignored,
    and an ignored signal stays ignored, so the test waited out its timeouts and failed."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)
