"""The fault drills (issue 5 §1): the real daemon on the real Docker engine.

Every drill runs `gpuci-tui run` as a real process (tests/real/rig.py) and
checks the three promises of the issue: no job is abandoned or canceled
because of the manager, a slot never has two live containers, and the slots
are filled again afterwards. Their images are tests/conftest.py's
(the emulator, and broken_image).
"""
