bpref                 	q1	1.0000
bpref                 	q2	0.0000
bpref                 	q3	0.0000
bpref                 	q4	0.0000
bpref                 	q5	1.0000
bpref                 	q6	1.0000
bpref                 	all	0.5000
