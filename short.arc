filedesc://x.arc 1.2.3.4 20200101000000 text/plain 65
1 0 Test
URL IP-address Archive-date Content-type Archive-length

http://e.x/0 1.2.3.4 20200101000000 text/html 409
HTTP/1.1 200 OK
Content-Type: text/html
Content-Length: 344

<html><body><p>arc page 0 words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words </p></body></html>
http://e.x/1 1.2.3.4 20200101000000 text/html 349
HTTP/1.1 200 OK
Content-Type: text/html
Content-Length: 344

<html><body><p>arc page 1 words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words </p></body></html>
http://e.x/2 1.2.3.4 20200101000000 text/html 409
HTTP/1.1 200 OK
Content-Type: text/html
Content-Length: 344

<html><body><p>arc page 2 words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words </p></body></html>
http://e.x/3 1.2.3.4 20200101000000 text/html 409
HTTP/1.1 200 OK
Content-Type: text/html
Content-Length: 344

<html><body><p>arc page 3 words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words </p></body></html>
http://e.x/4 1.2.3.4 20200101000000 text/html 409
HTTP/1.1 200 OK
Content-Type: text/html
Content-Length: 344

<html><body><p>arc page 4 words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words words </p></body></html>
