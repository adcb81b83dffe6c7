from daintree_tui.cli import run

run()
