! Fixture: Fortran WRITE statements in a time loop, and a read loop.
program output
  implicit none
  integer :: step, i
  real :: a(100)
  open(unit=10, file='out.dat', form='unformatted')
  do step = 1, 5
    do i = 1, 100
      a(i) = step * i
    end do
    write(10) a
  end do
  close(10)
  open(unit=11, file='out.dat', form='unformatted')
  do step = 1, 5
    read(11) a
  end do
  close(11)
end program output
