-- wrk: POST /json to envoy ratelimit, one descriptor, one of 1,000 keys at random.
local n = 0
function setup(thread) n = n + 1; thread:set("id", n) end
function init(args) math.randomseed(id * 7919) end
function request()
  local body = string.format('{"domain":"bench","descriptors":[{"entries":[{"key":"client","value":"k%04d"}]}]}', math.random(0, 999))
  return wrk.format("POST", "/json", {["Content-Type"] = "application/json"}, body)
end
