"""Prepare GMN's database: run its migrations, then whitelist the subjects given
as arguments for create, update and delete (as `manage.py whitelist-add` would;
that command crashes on GMN 3.5.2: KeyError 'skip_checks').

Run with the GMN virtualenv's Python, from the directory that holds
gmn_test_settings.py (written from settings.py.in).
"""
import os
import sys

sys.path.insert(0, os.getcwd())
os.environ["DJANGO_SETTINGS_MODULE"] = "gmn_test_settings"
sys.modules.setdefault("d1_gmn.settings", __import__("gmn_test_settings"))

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

call_command("migrate", verbosity=0, interactive=False)

import d1_gmn.app.models  # noqa: E402
import d1_gmn.app.sciobj_store  # noqa: E402

# The object store's version file, which GMN's setup writes (without it GMN
# refuses to delete: "non-matching filesystem store version").
if not os.path.exists(d1_gmn.app.sciobj_store.get_store_version_path()):
    d1_gmn.app.sciobj_store.save_store_version()

for subject in sys.argv[1:]:
    d1_gmn.app.models.whitelist_for_create_update_delete(subject)
