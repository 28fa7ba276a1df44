-- (SQLite flavour of the PostgreSQL migration of the same name.)
-- Safe and cheap: summaries answered from a cache shared by the replicas, daily token budgets per
-- tenant, and what the call log needs to tell cache hits, provider-cached tokens, budget
-- fallbacks and compaction loops (a fingerprint of each summary written, so that a request whose
-- previous summary is one compactd just wrote can be found).
create table summary_cache (
    cache_key     text primary key,
    summary       text not null,
    created_at_ms bigint not null,
    expires_at_ms bigint not null
);
create index summary_cache_expiry_idx on summary_cache (expires_at_ms);

create table tenant_budgets (
    tenant        text primary key,
    daily_tokens  bigint not null,
    updated_at_ms bigint not null
);

alter table summarization_calls add column cached boolean not null default 0;
alter table summarization_calls add column cached_input_tokens bigint not null default 0;
alter table summarization_calls add column summary_fingerprint text;
alter table summarization_calls add column loop_detected boolean not null default 0;
alter table summarization_calls add column budget_exhausted boolean not null default 0;
create index summarization_calls_fingerprint_idx
    on summarization_calls (tenant, summary_fingerprint, created_at_ms)
    where summary_fingerprint is not null;

alter table compactions add column loop_detected boolean not null default 0;
