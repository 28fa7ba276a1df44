-- (SQLite flavour of the PostgreSQL migration of the same name.)
-- A prepared summary found from a compaction that names no session (a pi-family agent's remote
-- endpoint, issue 67): the conversation known by its first message read loosely (`opening`), and
-- the covered prefix's chained hash read as such an agent writes its conversation into its
-- summarization prompt (`loose_hash`: each text cut, no reasoning). Empty for rows written before.
alter table prepared_summaries add column opening text not null default '';
alter table prepared_summaries add column loose_hash text not null default '';
create index prepared_summaries_opening on prepared_summaries (tenant, opening);
