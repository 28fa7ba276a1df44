-- Recall's full-text index merges its segments sixteen at a time instead of four (FTS5's
-- `automerge`, kept in recall_fts_config): each turn written is copied through fewer merge levels
-- (BENCHMARKS.md, issue 26). A search may read up to sixteen segments a level instead of four;
-- its time is spent ranking the turns that match, not finding them.
insert into recall_fts (recall_fts, rank) values ('automerge', 16);
