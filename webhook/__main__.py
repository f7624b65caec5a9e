from webhook.app.cli import entry

entry()
