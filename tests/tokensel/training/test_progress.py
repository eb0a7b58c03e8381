"""tokensel.training.progress: progress bars for long runs, off in the book build."""

from tokensel.training import progress


def test_bars_follow_the_setting(monkeypatch):
    monkeypatch.setenv("TOKENSEL_PROGRESS", "0")
    with progress.bar(10, "x") as pb:
        pb.update(3)
        assert pb.disable
    with progress.bar(10, "x", disable=False) as pb:  # an explicit choice wins over the setting
        assert not pb.disable
    monkeypatch.setenv("TOKENSEL_PROGRESS", "1")
    with progress.bar(10, "x") as pb:
        assert not pb.disable
