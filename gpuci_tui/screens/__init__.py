"""Full-screen views of the console: dashboard, dialogs, log view, setup wizard."""
