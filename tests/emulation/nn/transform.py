# nn/*.cu -> C++ for the host emulation: kernel launches f<<<g, b>>>(args)
# become emu_launch(g, b, lambda) (../emu_sched.cpp runs each block's threads as
# fibers), after checking that every pointer argument is device memory and with
# the device pages accessible while it runs (cuda_runtime.h); "__global__ static"
# loses its second static (__global__ is static here).
import re, sys
s = open(sys.argv[1]).read()
def rep(m):
    name, cfg, args = m.group(1), m.group(2), m.group(3)
    g, b = cfg.rsplit(',', 1)
    return ('{ emu_open_kernel("%s", %s%s); emu_launch(%s, %s, [&]() { %s(%s); }, "%s"); emu_dev_close(); }'
            % (name, name, ', ' + args if args.strip() else '', g, b, name, args, name))
s = re.sub(r'(\w+)<<<(.*?)>>>\((.*?)\);', rep, s, flags=re.S)
s = s.replace('__global__ static', '__global__')
open(sys.argv[2], 'w').write(s)
