-- Summaries prepared ahead (issue 67): an agent session's conversation summarized in the
-- background once it passes a share of its model's window, kept where every replica finds it,
-- and answered from when the session's compaction comes over the same prefix. One a session:
-- a newer preparation replaces the older.
create table prepared_summaries (
    tenant text not null,
    session_key text not null,
    -- How many of the conversation's items (messages, or Responses input items) it covers, and
    -- the chained hash of those items: a compaction whose first items hash the same matches.
    prefix_items bigint not null,
    prefix_hash text not null,
    -- compactd's estimate of those items' tokens, to tell when the part after them outgrew it.
    prefix_tokens bigint not null,
    summary text not null,
    model text not null,
    created_at_ms bigint not null,
    primary key (tenant, session_key)
);
create index prepared_summaries_created on prepared_summaries (created_at_ms);
