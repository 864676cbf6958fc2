(lp0
Vcode:200 method:get
p1
aVcode:400 method:post
p2
a.I01
.