-- wrk script: every request is a fresh, correctly signed standard-webhooks delivery
-- (https://www.standardwebhooks.com), the way a provider sends them, so the server does
-- all of its work (HMAC check, JSON canonicalisation, key derivation, durable claim).
--
--   BENCH_KEY_HEX=<hex of the secret's 32 key bytes> \
--   wrk -t2 -c64 -d10s -s sign.lua http://127.0.0.1:8080/webhooks/ota -- MODE NONCE [PACE]
--
-- MODE is "unique" (every delivery a new event) or "half" (every second delivery repeats
-- an event sent shortly before, byte for byte, with a fresh timestamp and signature: a
-- provider's redelivery). NONCE keeps event ids of separate runs apart. PACE, in
-- milliseconds, makes each connection wait that long between an answer and its next
-- request (0 or none: no wait, the server's saturation).
--
-- LuaJIT has no HMAC; wrk links OpenSSL's libcrypto, so the script calls its HMAC and
-- base64 through the FFI (about a microsecond a request). done() prints one line
-- "WRKJSON {...}" that the load harness (load_test.go) reads.

local ffi = require("ffi")
ffi.cdef [[
typedef struct evp_md_st EVP_MD;
const EVP_MD *EVP_sha256(void);
unsigned char *HMAC(const EVP_MD *evp_md, const void *key, int key_len,
                    const unsigned char *d, size_t n, unsigned char *md, unsigned int *md_len);
int EVP_EncodeBlock(unsigned char *t, const unsigned char *f, int n);
]]

local crypto
do
  local ok, lib = pcall(ffi.load, "libcrypto.so.3")
  crypto = ok and lib or ffi.C -- wrk itself links libcrypto
end

local threads = {}
local next_id = 0

function setup(thread)
  next_id = next_id + 1
  thread:set("tid", next_id)
  table.insert(threads, thread)
end

local key, keylen, sha256
local mac = ffi.new("unsigned char[32]")
local maclen = ffi.new("unsigned int[1]")
local b64 = ffi.new("unsigned char[48]")
local half = false
local nonce = "0"
local counter = 0
local path

local function hexbytes(h)
  return (h:gsub("..", function(c) return string.char(tonumber(c, 16)) end))
end

function init(args)
  local mode = args[1] or "unique"
  if mode ~= "unique" and mode ~= "half" then
    error("MODE must be unique or half, not " .. mode)
  end
  half = mode == "half"
  nonce = args[2] or tostring(os.time())
  local pace = tonumber(args[3] or "0")
  if not pace or pace < 0 then
    error("PACE must be a number of milliseconds, not " .. tostring(args[3]))
  end
  if pace > 0 then
    -- wrk waits for a global delay() only when one is defined when init returns.
    delay = function() return pace end
  end
  local hex = os.getenv("BENCH_KEY_HEX")
  if not hex or #hex ~= 64 then
    error("BENCH_KEY_HEX must hold the 32 key bytes in hex")
  end
  key = hexbytes(hex)
  keylen = #key
  sha256 = crypto.EVP_sha256()
  path = wrk.path
end

local function hmac(msg)
  crypto.HMAC(sha256, key, keylen, msg, #msg, mac, maclen)
  return mac
end

local function tohex(buf, n)
  local out = {}
  for i = 0, n - 1 do
    out[#out + 1] = string.format("%02x", buf[i])
  end
  return table.concat(out)
end

-- The event numbered n of this thread: its id spreads uniformly over the key space (as
-- random provider ids do), and its body depends on n alone, so a redelivery is identical.
-- Its booking is a hash of the nonce, the thread and n, as the fill's are of their keys:
-- bookings that cancellations name were made weeks before, in any order, so each new one
-- lands anywhere in the booking index. With the nonce, two runs against one server (a
-- warm-up, then the run measured) book apart, rather than the second's every refund
-- doubling the first's under refund forensics' business key.
local function event(n)
  local id = "msg_" .. tohex(hmac(nonce .. "/" .. tid .. "/" .. n), 8) .. "_" .. nonce .. "_" .. tid .. "_" .. n
  local booking = "BK-" .. tohex(hmac("booking/" .. nonce .. "/" .. tid .. "/" .. n), 6)
  local body = string.format(
    '{"event_id":"%s","type":"booking.cancelled","created_at":"2025-11-29T18:42:07Z",' ..
    '"property_id":"PROP-%06d","booking_id":"%s","status":"cancelled","effective_date":"2025-12-20",' ..
    '"channel":"booking.com","guest":{"name":"A. Guest","country":"DE"},"stay":{"arrival":"2025-12-20",' ..
    '"departure":"2025-12-23","nights":3,"rooms":[{"type":"DBL","rate_plan":"BAR-FLEX","adults":2,' ..
    '"children":0,"amount":{"value":"412.50","currency":"EUR"}}]},"refund":{"amount":"412.50",' ..
    '"currency":"EUR","reason":"guest_request","policy":"free_cancellation"},"cancellation":' ..
    '{"id":"CXL-%d","requested_at":"2025-11-29T18:41:55Z","source":"guest"},"version":3}',
    id, n % 400, booking, n)
  return id, body
end

function request()
  counter = counter + 1
  local n = counter
  if half and counter % 2 == 0 then
    -- An odd (original) event from the last thousand or so.
    n = counter - 1 - 2 * ((counter * 7919) % 500)
    if n < 1 then n = 1 end
  end
  local id, body = event(n)
  local ts = tostring(os.time())
  local m = hmac(id .. "." .. ts .. "." .. body)
  local len = crypto.EVP_EncodeBlock(b64, m, 32)
  return wrk.format("POST", path, {
    ["Content-Type"] = "application/json",
    ["User-Agent"] = "hookdedup-bench/wrk",
    ["webhook-id"] = id,
    ["webhook-timestamp"] = ts,
    ["webhook-signature"] = "v1," .. ffi.string(b64, len),
  }, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"errors_connect":%d,"errors_read":%d,' ..
    '"errors_write":%d,"errors_status":%d,"errors_timeout":%d,"p50_us":%d,"p90_us":%d,' ..
    '"p99_us":%d,"p999_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean))
end
