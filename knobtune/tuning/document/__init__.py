"""The experiment: the typed document a study is asked to do, and that document resolved on this machine."""
