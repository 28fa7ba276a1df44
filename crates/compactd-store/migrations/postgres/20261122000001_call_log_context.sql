-- Every summarization is logged through the pipeline: the tenant that asked and what the call was
-- for (prompt, history, turn_prefix, branch) join the row.
alter table summarization_calls add column tenant text not null default '';
alter table summarization_calls add column purpose text not null default 'prompt';
create index summarization_calls_tenant_idx on summarization_calls (tenant, created_at_ms);
