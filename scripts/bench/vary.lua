-- wrk script: POST the JSON body in $BODY_FILE with "@@N@@" replaced by a number that differs
-- on every request (and per wrk thread), so no two requests share a cache key: every one is a miss.
local template
local counter = 0
local prefix = ""
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("prefix", tostring(threads))
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
