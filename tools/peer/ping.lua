-- wrk: GET /ping, X-Client-Key one of 1,000 keys at random.
local n = 0
function setup(thread) n = n + 1; thread:set("id", n) end
function init(args) math.randomseed(id * 7919) end
function request()
  return wrk.format("GET", "/ping", {["X-Client-Key"] = string.format("k%04d", math.random(0, 999))})
end
