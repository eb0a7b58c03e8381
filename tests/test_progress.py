"""tokensel.training.progress: progress bars for long runs, off in the book build."""

from tokensel.training import progress


def test_bars_follow_the_setting(monkeypatch):
    monkeypatch.setenv("TOKENSEL_PROGRESS", "0")
    with progress.bar(10, "x") as pb:
        pb.update(3)  # the silent stand-in accepts what tqdm accepts
        pb.set_postfix(loss=1.0)
    assert isinstance(progress.bar(10, "x"), progress._Silent)
    bar = progress.bar(10, "x", disable=False)  # an explicit choice wins over the setting
    assert not isinstance(bar, progress._Silent)
    bar.close()
