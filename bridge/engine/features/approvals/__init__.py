"""Codex's requests that wait on the user: approvals, questions, elicitations.

:mod:`.approvals` decides what each kind looks like and what Codex gets back; its private
parts: ``_pending`` (each request from arrival until settled once) and ``_views`` (the pure
views of each question and answer).
"""
