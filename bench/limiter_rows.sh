# The limiter rows shared by bench/limiters.sh and bench/instructions.sh: "name|command".
# shellcheck disable=SC2034
LIMITER_ROWS=(
  "CL.THROTTLE|CL.THROTTLE user:__rand_int__ 1000000 1000 1"
  "LIMIT.FIXED|LIMIT.FIXED f:__rand_int__ 1000000 1m"
  "LIMIT.SLIDING|LIMIT.SLIDING s:__rand_int__ 1000000 1m"
  "LIMIT.LOG|LIMIT.LOG l:__rand_int__ 100000 1s"
  "LIMIT.TOKEN|LIMIT.TOKEN t:__rand_int__ 1000000 1000 1s"
  "LIMIT.LEAKY|LIMIT.LEAKY k:__rand_int__ 1000000 1000 1s"
  "LIMIT.GCRA|LIMIT.GCRA g:__rand_int__ 1000000 1000 1s"
  "LIMIT.ALL(2)|LIMIT.ALL FIXED a:__rand_int__ 1000000 1m TOKEN b:__rand_int__ 1000000 1000 1s"
  "LIMIT.ACQUIRE|LIMIT.ACQUIRE p:__rand_int__ 1000000 10s id:__rand_int__"
)
