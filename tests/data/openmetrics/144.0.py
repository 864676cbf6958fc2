(lp0
Vcontrol
p1
aVfilesrc
p2
a.I00
.