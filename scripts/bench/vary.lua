-- wrk script: POST the JSON body in $BODY_FILE with "@@N@@" replaced by a number that differs
-- on every request (and per wrk thread), so no two requests share a cache key: every one is a miss.
local template
local counter = 0
local threads = 0
-- `prefix` is a global: each thread's own, set by setup() (a local here would shadow it).

function setup(thread)
  threads = threads + 1
  -- VARY_PREFIX tells runs apart, so that one run's bodies are not another's cache hits.
  thread:set("prefix", (os.getenv("VARY_PREFIX") or "") .. tostring(threads))
end

function init(args)
  local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
  template = f:read("*a")
  f:close()
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  local body = template:gsub("@@N@@", prefix .. "-" .. counter)
  return wrk.format("POST", nil, nil, body)
end
