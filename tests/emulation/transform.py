# compress/*.cu and optim/*.cu -> C++ for the host emulation: kernel launches
# f<<<g, b>>>(args) become emu_launch(g, b, lambda) (emu_sched.cpp runs each
# block's threads as fibers), after checking that every pointer argument is
# device memory and with the device pages accessible while it runs (tracked
# device memory: nn/cuda_runtime.h, nn/emu_device.c); blocks of 64 threads and
# at most 3 blocks, so that every grid-stride loop goes round; sbc's decoder parses
# every payload of up to 6,000 bits in parallel and walks the longer ones in one thread
# (on a GPU: more than 1,024 codes and up to 2^28 bits in parallel), so that the tests'
# frames reach both of its paths, the walk's edge cases the parallel one.
import re, sys
s = open(sys.argv[1]).read()
def rep(m):
    name, cfg, args = m.group(1), m.group(2), m.group(3)
    g, b = cfg.rsplit(',', 1)
    return ('{ emu_open_kernel("%s", %s%s); emu_launch(%s, %s, [&]() { %s(%s); }, "%s"); emu_dev_close(); }'
            % (name, name, ', ' + args if args.strip() else '', g, b, name, args, name))
s = re.sub(r'(\w+)<<<(.*?)>>>\((.*?)\);', rep, s, flags=re.S)
s = s.replace('#define TPB 256', '#define TPB 64').replace('if (b > 65536) b = 65536;', 'if (b > 3) b = 3;')
s = s.replace('#define RICE_PARSE_MAX (1ull << 28)', '#define RICE_PARSE_MAX 6000ull')
s = s.replace('#define RICE_WALK_CODES 1024', '#define RICE_WALK_CODES 0')
open(sys.argv[2], 'w').write(s)
