import re, sys
s = open(sys.argv[1]).read()
def rep(m):
    name, cfg, args = m.group(1), m.group(2), m.group(3)
    g, b = cfg.rsplit(',', 1)
    return 'emu_launch(%s, %s, [&]() { %s(%s); });' % (g, b, name, args)
s = re.sub(r'(\w+)<<<(.*?)>>>\((.*?)\);', rep, s, flags=re.S)
s = s.replace('#define TPB 256', '#define TPB 64').replace('if (b > 65536) b = 65536;', 'if (b > 3) b = 3;')
open(sys.argv[2], 'w').write(s)
