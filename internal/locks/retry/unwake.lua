-- A woken waiter found the lock taken (-wait notify): it is alive, so its
-- claim deadline no longer applies; the next release wakes it again.
-- KEYS[1]: the woken waiters (see enqueue.lua).
-- ARGV[1]: the owner.
return redis.call('HDEL', KEYS[1], ARGV[1])
