-- Recall's full-text index is filled once per batch of conversations by the writer (one
-- `insert … select` of the turns the batch added), no longer by a trigger per turn (issue 26).
-- FTS5 writes what it has gathered as a new index segment at the end of every statement that
-- touched it; fired from a trigger, that was every multi-row insert of turns — up to twenty
-- segments a batch, each one merged again later. One statement makes one segment a batch.
-- Deleting still goes through the trigger: an external-content index is told what the deleted
-- row held, and deletes (expiry, a session removed) are rare.
drop trigger recall_turns_ai;
